// Runner test helpers: posix_spawn with redirected output, the scratch directory, saved-model reads.
#include "tests/runner/runner_process.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>
#include <thread>

#include "examples/example_models.h"
#include "ops/ops.h"
#include "serialization/model_file.h"

extern char** environ;

namespace mirra::runner::test {

namespace fs = std::filesystem;

Workspace::Workspace() : dir(fs::temp_directory_path() / ("mirra_runner_test_" + std::to_string(::getpid()))) {
  fs::remove_all(dir);
  fs::create_directories(dir);
}

Workspace::~Workspace() { fs::remove_all(dir); }

const Workspace& workspace() {
  static const Workspace w;
  return w;
}

const std::string& mlp_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "mlp.mirra";
    auto model = examples::build_example_model("mlp", 1);
    MIRRA_CHECK(model.ok() && serialization::save_model(*model, p).ok());
    return p;
  }();
  return path;
}

const std::string& resnet20_f64_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "resnet20_f64.mirra";
    auto model = examples::build_example_model("resnet20", 1, {.dtype = graph::DType::f64});
    MIRRA_CHECK(model.ok() && serialization::save_model(*model, p).ok());
    return p;
  }();
  return path;
}

const std::string& resnet20_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "resnet20.mirra";
    auto model = examples::build_example_model("resnet20", 1);
    MIRRA_CHECK(model.ok() && serialization::save_model(*model, p).ok());
    return p;
  }();
  return path;
}

const std::string& brier_mlp_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "brier_mlp.mirra";
    auto model = examples::build_example_model("mlp", 1);
    MIRRA_CHECK(model.ok());
    graph::Graph& g = model->graph;
    graph::Builder b(g, ops::registry());
    const graph::Node& cross_entropy = g.node(g.node(model->signature.loss.node).inputs[0].node);
    const graph::ValueRef logits = cross_entropy.inputs[0], labels = cross_entropy.inputs[1];
    const graph::ValueRef error = ops::sub(b, ops::softmax(b, logits), ops::one_hot(b, labels, 10));
    const graph::ValueRef w = {*g.find("fc1/w"), 0};
    const graph::ValueRef decay = ops::mul(b, ops::scalar_of(b, 1e-4, w), ops::reduce_sum(b, ops::square(b, w)));
    model->signature.loss = ops::add(b, ops::reduce_mean(b, ops::square(b, error)), decay);
    MIRRA_CHECK(b.status().ok() && serialization::save_model(*model, p).ok());
    return p;
  }();
  return path;
}

const std::string& stats_mlp_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "stats_mlp.mirra";
    auto model = examples::build_example_model("mlp", 1);
    MIRRA_CHECK(model.ok());
    graph::Graph& g = model->graph;
    graph::Builder b(g, ops::registry());
    auto scope = b.scope("stats");
    const graph::ValueRef images = {*g.find(model->signature.features), 0};
    const std::vector<int64_t>& batch_dims = g.type(images).shape.dims;
    const graph::Shape image(std::vector<int64_t>(batch_dims.begin() + 1, batch_dims.end()));
    using ops::VariableAggregation;
    const graph::ValueRef seen =
        ops::variable(b, "images_seen", {}, ops::Initializer::zeros(), graph::DType::f32, false, VariableAggregation::sum);
    const graph::ValueRef mean =
        ops::variable(b, "mean_image", image, ops::Initializer::zeros(), graph::DType::f32, false, VariableAggregation::mean);
    const graph::ValueRef first = ops::variable(b, "first_image", image, ops::Initializer::zeros(), graph::DType::f32, false,
                                                VariableAggregation::only_first_replica);
    const graph::ValueRef mean_on_read = ops::variable(b, "mean_image_on_read", image, ops::Initializer::zeros(), graph::DType::f32,
                                                       false, VariableAggregation::mean, ops::VariableSynchronization::on_read);
    const graph::ValueRef momentum = ops::scalar_of(b, 0.9, mean), rest = ops::scalar_of(b, 0.1, mean);
    std::vector<int64_t> begin(static_cast<size_t>(image.rank()) + 1, 0), size = {1};
    size.insert(size.end(), image.dims.begin(), image.dims.end());
    const graph::NodeId updates[] = {
        ops::assign_add(b, seen, ops::cast(b, ops::dim_size(b, images, 0), graph::DType::f32)),
        ops::assign(b, mean, ops::add(b, ops::mul(b, momentum, mean), ops::mul(b, rest, ops::reduce_mean(b, images, {0})))),
        ops::assign(b, first, ops::reshape(b, ops::slice(b, images, begin, size), image.dims)),
        ops::assign(b, mean_on_read,
                    ops::add(b, ops::mul(b, momentum, mean_on_read), ops::mul(b, rest, ops::reduce_mean(b, images, {0})))),
    };
    MIRRA_CHECK(b.status().ok(), b.status().message());
    for (graph::NodeId update : updates) model->signature.state_updates.push_back(g.node(update).name);
    MIRRA_CHECK(serialization::save_model(*model, p).ok());
    return p;
  }();
  return path;
}

const std::string& masked_mlp_file() {
  static const std::string path = [] {
    const std::string p = workspace() / "masked_mlp.mirra";
    auto model = examples::build_example_model("mlp", 1);
    MIRRA_CHECK(model.ok());
    graph::Graph& g = model->graph;
    graph::Builder b(g, ops::registry());
    const graph::Node& cross_entropy = g.node(g.node(model->signature.loss.node).inputs[0].node);
    const graph::ValueRef losses = {cross_entropy.id, 0}, labels = cross_entropy.inputs[1];
    static constexpr int64_t kLeftOut = 9;
    const graph::ValueRef left_out =
        ops::equal(b, labels, ops::constant<int64_t>(b, graph::Shape{}, std::span<const int64_t>(&kLeftOut, 1)));
    const graph::ValueRef keep = ops::sub(b, ops::scalar_of(b, 1.0, losses), ops::cast(b, left_out, g.type(losses).dtype));
    model->signature.loss_weight = ops::reduce_sum(b, keep);
    model->signature.loss = ops::div(b, ops::reduce_sum(b, ops::mul(b, losses, keep)), model->signature.loss_weight);
    const graph::ValueRef logits = cross_entropy.inputs[0];
    const graph::ValueRef hits = ops::cast(b, ops::equal(b, ops::argmax(b, logits, 1), labels), g.type(losses).dtype);
    model->signature.metrics.push_back({.name = "kept_accuracy",
                                        .value = ops::div(b, ops::reduce_sum(b, ops::mul(b, hits, keep)), model->signature.loss_weight),
                                        .reduction = "mean",
                                        .weight = model->signature.loss_weight});
    model->signature.metrics.push_back({.name = "kept", .value = model->signature.loss_weight, .reduction = "sum"});
    MIRRA_CHECK(b.status().ok() && serialization::save_model(*model, p).ok(), b.status().message());
    return p;
  }();
  return path;
}

Process spawn(std::vector<std::string> args, const std::string& tag, int stdout_fd) {
  args.insert(args.begin(), MIRRA_RUNNER);
  return spawn_program(std::move(args), tag, stdout_fd);
}

Process spawn_program(std::vector<std::string> args, const std::string& tag, int stdout_fd) {
  Process p{.out = workspace() / (tag + ".out"), .err = workspace() / (tag + ".err")};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  posix_spawn_file_actions_addopen(&actions, 2, p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(posix_spawn(&p.pid, argv[0], &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  return p;
}

int wait_for(const Process& p) {
  int status = 0;
  ::waitpid(p.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<int> wait_for(const Process& p, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(p.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

Run run(std::vector<std::string> args, const std::string& tag) {
  const Process p = spawn(std::move(args), tag);
  const int code = wait_for(p);
  Run r{code, read_text(p.out), read_text(p.err)};
  if (code != 0) MESSAGE(tag << " exited " << code << ": " << r.err);
  return r;
}

std::string last_line(const std::string& text) {
  std::string s = text;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}

std::vector<double> step_field(const std::string& path, const std::string& key) {
  std::ifstream lines(path);
  std::vector<double> values;
  for (std::string line; std::getline(lines, line);) values.push_back(nlohmann::json::parse(line)[key].get<double>());
  return values;
}

std::vector<double> step_losses(const std::string& path) { return step_field(path, "loss"); }

std::vector<double> step_metric(const std::string& path, const std::string& name) {
  std::ifstream lines(path);
  std::vector<double> values;
  for (std::string line; std::getline(lines, line);) values.push_back(nlohmann::json::parse(line)["metrics"][name].get<double>());
  return values;
}

std::map<std::string, graph::TensorValue> trained_values(const std::string& path) {
  auto model = serialization::load_model(path, ops::registry());
  REQUIRE(model.ok());
  std::map<std::string, graph::TensorValue> values;
  for (const auto& w : model->weights) values[w.name] = w.value;
  for (const auto& s : model->signature.optimizer.state) values[s.name] = s.value;
  return values;
}

namespace {

// A value's elements as doubles (f32, f64 or i64).
std::vector<double> as_doubles(const graph::TensorValue& value) {
  switch (value.type.dtype) {
    case graph::DType::f32: return {value.values<float>().begin(), value.values<float>().end()};
    case graph::DType::f64: return {value.values<double>().begin(), value.values<double>().end()};
    case graph::DType::i64: return {value.values<int64_t>().begin(), value.values<int64_t>().end()};
    default: FAIL("no comparison of " << value.type.to_string()); return {};
  }
}

}  // namespace

void check_close(const std::map<std::string, graph::TensorValue>& got, const std::map<std::string, graph::TensorValue>& want,
                 double relative) {
  REQUIRE(got.size() == want.size());
  for (const auto& entry : want) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    CAPTURE(name);
    REQUIRE(got.contains(name));
    REQUIRE(got.at(name).type == entry.second.type);
    const std::vector<double> a = as_doubles(got.at(name)), b = as_doubles(entry.second);
    REQUIRE(a.size() == b.size());
    double scale = 0, diff = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(b[i])));
      diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    }
    CHECK(diff <= relative * std::max(scale, 1e-30));
  }
}

std::vector<std::string> train_args(std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", mlp_file(), "--deterministic", "--batch-size", "32", "--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace mirra::runner::test
