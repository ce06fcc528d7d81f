// The runner against hostile and unlucky input: crafted model files that ask for sizes that overflow
// or exceed the machine, optimizer state and weights that are not finite, training that diverges,
// readers that go away, output paths that are devices, links or unwritable, a FIFO as a model, and a
// placeholder nothing feeds.
// Each case must end with a clear error and exit code 2, or finish its job, and never lose a file.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include "examples/example_models.h"
#include "ops/ops.h"
#include "serialization/checkpoint.h"
#include "serialization/file_io.h"
#include "serialization/model_file.h"
#include "tests/runner/runner_process.h"

namespace mirra::runner {

namespace {

namespace fs = std::filesystem;
using namespace test;

// The example MLP with whatever `craft` does to it, written to the workspace.
std::string crafted_mlp(const std::string& name, const std::function<void(graph::Builder&, serialization::Model&)>& craft) {
  auto model = examples::build_example_model("mlp", 1);
  REQUIRE(model.ok());
  graph::Builder b(model->graph, ops::registry());
  craft(b, *model);
  REQUIRE(b.status().ok());
  const std::string path = workspace() / (name + ".mirra");
  REQUIRE(serialization::save_model(*model, path).ok());
  return path;
}

// A node added with sane attributes, then given a hostile one (the builder would refuse it).
std::string with_hostile_attr(const std::string& name, const std::function<graph::ValueRef(graph::Builder&)>& add,
                              const char* attr, graph::AttrValue value) {
  return crafted_mlp(name, [&](graph::Builder& b, serialization::Model& model) {
    const graph::ValueRef ref = add(b);
    model.graph.mutable_node(ref.node).attrs.set(attr, std::move(value));
  });
}

graph::ValueRef labels(graph::Builder& b) { return {*b.graph().find("labels"), 0}; }
graph::ValueRef images(graph::Builder& b) { return {*b.graph().find("images"), 0}; }

void check_refused(const Run& r, const std::vector<std::string>& words) {
  CHECK(r.code == 2);
  for (const std::string& word : words) CHECK_MESSAGE(r.err.find(word) != std::string::npos, word);
}

}  // namespace

// A placeholder the runner does not feed (it feeds the images and the labels) is named before
// anything trains or evaluates, by every command that would run the loss: no step runs, exit 2.
TEST_CASE("Runner.hostile_model.an_unfed_placeholder_is_named_before_training") {
  const std::string path = crafted_mlp("unfed_aux", [](graph::Builder& b, serialization::Model& model) {
    const graph::ValueRef aux = ops::placeholder(b, "aux", graph::DType::f32, {-1, 3});
    model.signature.loss = ops::add(b, model.signature.loss, ops::reduce_mean(b, aux));
  });
  const std::string metrics = workspace() / "unfed.jsonl";
  for (const std::string strategy : {"one_device", "mirrored"}) {
    CAPTURE(strategy);
    const Run r = run({"train", path, "--strategy", strategy, "--steps", "2", "--batch-size", "8", "--metrics", metrics}, "unfed");
    check_refused(r, {"model '" + path + "'", "the training step needs placeholder 'aux' (f32[?,3]), which nothing feeds",
                      "the batches feed 'images', 'labels'"});
    CHECK_FALSE(fs::exists(metrics));
  }
  check_refused(run({"eval", path}, "unfed_eval"), {"the evaluation step needs placeholder 'aux' (f32[?,3])"});
}

// Sizes that overflow int64 are refused when the file loads, by every command, naming node and attribute.
TEST_CASE("Runner.hostile_model.sizes_that_overflow_are_refused_at_load") {
  const std::string one_hot = with_hostile_attr(
      "one_hot_2_62", [](graph::Builder& b) { return ops::one_hot(b, labels(b), 10); }, "depth", int64_t{1} << 62);
  const std::string pad = with_hostile_attr(
      "pad_wraps", [](graph::Builder& b) { return ops::pad(b, images(b), {0, 0, 1, 1, 1, 1, 0, 0}); }, "paddings",
      std::vector<int64_t>{0, 0, 0, std::numeric_limits<int64_t>::max() - 20, 0, 0, 0, 0});
  for (const std::string command : {"train", "eval", "inspect"}) {
    CAPTURE(command);
    check_refused(run({command, one_hot}, "one_hot_" + command), {"OneHot", "depth", "overflow"});
    check_refused(run({command, pad}, "pad_" + command), {"Pad", "paddings must be in [0, 2^31]"});
  }
}

// Sizes that fit int64 but not the machine are refused before anything is allocated: the estimate
// names the largest tensors, and the process never grows (four f32[2^31] variables would be 32 GiB).
// The estimate covers what the steps run (and every variable): a huge node nothing reads is pruned
// from training and never planned by evaluation.
TEST_CASE("Runner.hostile_model.memory_beyond_the_limit_is_refused_before_allocating") {
  const std::string variables = crafted_mlp("huge_variables", [](graph::Builder& b, serialization::Model&) {
    for (int i = 0; i < 4; ++i) ops::variable(b, "unused_" + std::to_string(i), {int64_t{1} << 31});
  });
  const std::string one_hot = crafted_mlp("one_hot_2_40", [](graph::Builder& b, serialization::Model& model) {
    model.signature.loss = ops::add(b, model.signature.loss, ops::reduce_mean(b, ops::one_hot(b, labels(b), int64_t{1} << 40)));
  });
  const std::string unread = crafted_mlp("one_hot_2_40_unread", [](graph::Builder& b, serialization::Model&) {
    ops::one_hot(b, labels(b), int64_t{1} << 40);
  });
  const Process p = spawn({"train", variables, "--steps", "1"}, "huge_variables");
  int status = 0;
  rusage usage{};
  ::wait4(p.pid, &status, 0, &usage);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(usage.ru_maxrss < 1024 * 1024);  // KiB: under 1 GiB
  const std::string err = read_text(p.err);
  CHECK(err.find("over the memory limit") != std::string::npos);
  CHECK(err.find("unused_0 f32[2147483648] 8.0 GiB") != std::string::npos);

  check_refused(run({"train", one_hot, "--steps", "1", "--strategy", "one_device"}, "one_hot_2_40_train"),
                {"over the memory limit", "OneHot f32[128,1099511627776] 512.0 TiB"});
  check_refused(run({"eval", one_hot}, "one_hot_2_40_eval"), {"over the memory limit"});
  CHECK(run({"train", unread, "--steps", "1"}, "one_hot_2_40_unread_train").code == 0);
  CHECK(run({"eval", unread}, "one_hot_2_40_unread_eval").code == 0);
  // A limit below what the plain MLP needs refuses it too; one above lets it train.
  check_refused(run({"train", mlp_file(), "--steps", "1", "--memory-limit", "64K"}, "limit_64k"), {"memory limit of 64.0 KiB"});
  CHECK(run({"train", mlp_file(), "--steps", "1", "--memory-limit", "4G"}, "limit_4g").code == 0);
  check_refused(run({"train", mlp_file(), "--memory-limit", "lots"}, "limit_bad"), {"--memory-limit is 'lots'"});
}

TEST_CASE("Runner.hostile_model.optimizer_state_and_weights_must_be_valid") {
  const std::string negative_iterations = crafted_mlp("negative_iterations", [](graph::Builder&, serialization::Model& model) {
    const ops::Optimizer adam = ops::Optimizer::adam(0.001);
    model.signature.optimizer = {.kind = adam.kind,
                                 .hyper_parameters = ops::optimizer_hyper_parameters(adam),
                                 .state = {{"optimizer/iterations", graph::TensorValue::from<int64_t>(graph::Shape{}, std::vector<int64_t>{-1})}}};
  });
  check_refused(run({"train", negative_iterations, "--steps", "2"}, "negative_iterations"),
                {"iteration count 'optimizer/iterations' is negative"});

  const std::string nan_weight = crafted_mlp("nan_weight", [](graph::Builder&, serialization::Model& model) {
    graph::TensorValue& weight = model.weights[0].value;
    std::vector<float> values(weight.values<float>().begin(), weight.values<float>().end());
    values[0] = std::numeric_limits<float>::quiet_NaN();
    weight = graph::TensorValue::from<float>(weight.type.shape, values);
  });
  check_refused(run({"train", nan_weight, "--steps", "1"}, "nan_weight_train"), {"holds 1 NaN or infinite values"});
  check_refused(run({"eval", nan_weight}, "nan_weight_eval"), {"holds 1 NaN or infinite values"});
}

// --lr 1e5 goes NaN within a few steps: training stops at that step with exit 2, --json's last line is
// still JSON (with the error), and no checkpoint or --save target ever holds a non-finite value.
TEST_CASE("Runner.divergence.stops_without_writing_non_finite_values") {
  const std::string ckpt = workspace() / "diverged_ckpt";
  const std::string save = workspace() / "diverged.mirra";
  fs::copy_file(mlp_file(), save);
  const auto before = trained_values(save);
  const Run r = run(train_args({"--steps", "50", "--lr", "1e5", "--checkpoint-dir", ckpt, "--checkpoint-every", "1", "--save", save,
                                "--json"}),
                    "diverged");
  CHECK(r.code == 2);
  CHECK(r.err.find("training diverged") != std::string::npos);
  const auto summary = nlohmann::json::parse(last_line(r.out));
  CHECK(summary["error"].get<std::string>().find("is NaN") != std::string::npos);
  CHECK(trained_values(save) == before);  // the old --save target is untouched
  const auto checkpoints = serialization::CheckpointStore(ckpt, 3).list();
  CHECK_FALSE(checkpoints.empty());
  for (const std::string& path : checkpoints) {
    auto bytes = serialization::read_file(path, "checkpoint");
    REQUIRE(bytes.ok());
    auto checkpoint = serialization::parse_checkpoint(bytes->span(), path);
    REQUIRE(checkpoint.ok());
    int64_t non_finite = 0;
    for (const auto& v : checkpoint->variables) {
      if (v.value.type.dtype != graph::DType::f32) continue;
      for (float x : v.value.values<float>()) non_finite += !std::isfinite(x);
    }
    CHECK(non_finite == 0);
  }

  // With --check-numerics the first non-finite gradient stops the step before it is applied.
  const Run checked = run(train_args({"--steps", "50", "--lr", "1e5", "--check-numerics"}), "diverged_checked");
  CHECK(checked.code == 2);
  CHECK(checked.err.find("(CheckNumerics)") != std::string::npos);
  CHECK(checked.err.find("the gradient of '") != std::string::npos);
}

// `mirra train ... | head -1`: the reader goes away, the run still finishes its checkpoint and save.
TEST_CASE("Runner.output.a_closed_pipe_loses_output_not_the_run") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);  // nobody will read
  const std::string ckpt = workspace() / "pipe_ckpt";
  const std::string save = workspace() / "pipe.mirra";
  const Process p = spawn(train_args({"--steps", "20", "--checkpoint-dir", ckpt, "--save", save}), "closed_pipe", fds[1]);
  ::close(fds[1]);
  CHECK(wait_for(p) == 0);
  CHECK(trained_values(save).at("optimizer/iterations").values<int64_t>()[0] == 20);
  CHECK(serialization::CheckpointStore(ckpt, 3).list().size() == 1);
}

// --save writes regular files only: a FIFO (or a device) in its place is refused before training; a
// symlink is followed and the file it names replaced.
TEST_CASE("Runner.output.save_refuses_devices_and_follows_links") {
  const std::string fifo = workspace() / "save_fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  check_refused(run(train_args({"--steps", "2", "--save", fifo}), "save_fifo"), {"--save", "not a regular file"});
  CHECK(fs::is_fifo(fifo));
  check_refused(run(train_args({"--steps", "2", "--trace", "/dev/null"}), "trace_device"), {"--trace", "not a regular file"});

  const std::string target = workspace() / "link_target.mirra";
  const std::string link = workspace() / "link.mirra";
  fs::create_symlink(target, link);
  REQUIRE(run(train_args({"--steps", "2", "--save", link}), "save_link").code == 0);
  CHECK(fs::is_symlink(link));
  CHECK(trained_values(target).at("optimizer/iterations").values<int64_t>()[0] == 2);
}

// A metrics file that cannot be written is reported (exit 2, a warning at once) while training, its
// checkpoint and its save still complete.
TEST_CASE("Runner.output.metrics_write_errors_are_reported") {
  const std::string save = workspace() / "metrics_full.mirra";
  const Run r = run(train_args({"--steps", "300", "--metrics", "/dev/full", "--save", save, "--json"}), "metrics_full");
  CHECK(r.code == 2);
  CHECK(r.err.find("warning: writing metrics file '/dev/full' failed") != std::string::npos);
  CHECK(nlohmann::json::parse(last_line(r.out))["error"].get<std::string>().find("incomplete") != std::string::npos);
  CHECK(trained_values(save).at("optimizer/iterations").values<int64_t>()[0] == 300);
}

// An unwritable checkpoint directory is found before the first step, not after the first epoch.
TEST_CASE("Runner.output.unwritable_checkpoint_directory_is_found_before_training") {
  const Run r = run(train_args({"--epochs", "1", "--checkpoint-dir", "/proc/self"}), "unwritable_ckpt");
  check_refused(r, {"cannot write in checkpoint directory '/proc/self'"});
  CHECK(r.out.find("epoch 1") == std::string::npos);
}

// Opening a FIFO for reading waits for a writer; the loader checks the file type without blocking.
TEST_CASE("Runner.hostile_model.a_fifo_is_refused_without_blocking") {
  const std::string fifo = workspace() / "model_fifo.mirra";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  for (const std::string command : {"inspect", "eval", "train"}) {
    CAPTURE(command);
    const Process p = spawn({command, fifo}, "fifo_" + command);
    const std::optional<int> code = wait_for(p, std::chrono::seconds(20));
    REQUIRE_MESSAGE(code.has_value(), "mirra " << command << " blocked on a FIFO");
    CHECK(*code == 2);
    CHECK(read_text(p.err).find("is not a regular file") != std::string::npos);
  }
}

}  // namespace mirra::runner
