// An op a program registers itself (Asinh, which mirra does not have: schema, CPU kernel and gradient in its own tables, outside
// the built-in ones) trains under one_device, mirrored and central_storage as one device trains it,
// and its model file saves, loads with that registry (and is refused, naming the op, without it), and
// trains again through the runner's model program, as ops/README.md's "Ops outside the tree"
// describes.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "serialization/model_file.h"
#include "tests/strategies/strategy_test_util.h"
#include "tools/mirra/model_program.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;

graph::Status asinh_kernel(runtime::KernelContext& ctx) {
  const runtime::Tensor& x = ctx.input(0);
  runtime::Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    if (x.dtype() == DType::f64) {
      y.mutable_data<double>()[i] = std::asinh(x.data<double>()[i]);
    } else {
      y.mutable_data<float>()[i] = std::asinh(x.data<float>()[i]);
    }
  }
  return graph::Status();
}

// The built-in tables and Asinh, as a program that embeds mirra would make them.
struct UserTables {
  graph::OpRegistry schemas = ops::registry();
  runtime::KernelRegistry kernels = ops::kernels();

  UserTables() {
    schemas.add(graph::OpSchema{
        .name = "Asinh",
        .inputs = {"x"},
        .infer = [](const graph::InferContext& ctx) -> graph::Expected<std::vector<graph::TensorType>> {
          if (ctx.input(0).dtype != DType::f32 && ctx.input(0).dtype != DType::f64) return ctx.error("Asinh takes f32 or f64");
          return std::vector<graph::TensorType>{ctx.input(0)};
        },
        .summary = "The inverse hyperbolic sine, element-wise.",
        .gradient = [](graph::GradientContext& g) -> std::vector<ValueRef> {  // dy / sqrt(1 + x^2)
          graph::Builder& b = g.builder;
          const ValueRef x = g.input(0);
          const ValueRef one = ops::scalar_of(b, 1.0, x);
          const ValueRef slope = ops::rsqrt(b, ops::add(b, one, ops::square(b, x)));
          return {ops::mul(b, g.grad(0), slope)};
        }});
    kernels.add("Asinh", graph::DeviceKind::cpu, {asinh_kernel});
  }
};

const UserTables& tables() {
  static const UserTables t;
  return t;
}

// images [?, 6] -> Asinh(images W1) -> logits, a classifier's objective: the model file's graph.
serialization::Model asinh_model() {
  serialization::Model model;
  graph::Builder b(model.graph, tables().schemas, /*seed=*/9);
  const ValueRef images = ops::placeholder(b, "images", DType::f64, {-1, 6});
  const ValueRef w1 = ops::variable(b, "w1", {6, 5}, ops::Initializer::glorot_uniform(), DType::f64);
  const ValueRef w2 = ops::variable(b, "w2", {5, 4}, ops::Initializer::glorot_uniform(), DType::f64);
  const ValueRef hidden = b.add_value({.op = "Asinh", .inputs = {ops::matmul(b, images, w1)}});
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, hidden, w2));
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  model.signature = {.features = "images",
                     .labels = "labels",
                     .loss = objective.loss,
                     .metrics = {{"correct", objective.correct}},
                     .optimizer = {.kind = "momentum", .hyper_parameters = {{"learning_rate", 0.5}, {"momentum", 0.9}}}};
  return model;
}

std::vector<Batch> asinh_batches() {
  runtime::Random rng(3);
  std::vector<Batch> batches;
  for (int64_t size : {7, 8, 2, 5}) {
    std::vector<double> x(static_cast<size_t>(size * 6));
    for (double& v : x) v = 2 * rng.uniform() - 1;
    std::vector<int64_t> labels(static_cast<size_t>(size));
    for (int64_t& l : labels) l = static_cast<int64_t>(rng.below(4));
    batches.push_back({runtime::Tensor::from<double>({size, 6}, std::span<const double>(x)),
                       runtime::Tensor::from<int64_t>({size}, std::span<const int64_t>(labels))});
  }
  return batches;
}

// The program's losses and replica 0's (or the only) variables after training on `batches`.
std::pair<std::vector<double>, std::map<std::string, std::vector<double>>> train(const TrainingProgram& program,
                                                                                 const std::string& strategy, int replicas,
                                                                                 const std::vector<Batch>& batches) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, tables().kernels, {.threads = 2});
  std::vector<double> losses;
  for (const Batch& batch : batches) {
    auto out = session.run(feeds(*distributed, batch), {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    losses.push_back((*out)[0].values<double>()[0]);
  }
  std::map<std::string, std::vector<double>> variables;
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string_view plain = replica_free_name(name, &replica);
    if (replica <= 0 && !plain.starts_with("optimizer/")) variables[std::string(plain)] = value;
  }
  return {losses, variables};
}

void check_strategies_train_as_one_device(const TrainingProgram& program) {
  const std::vector<Batch> batches = asinh_batches();
  const auto [want_losses, want] = train(program, "one_device", 1, batches);
  for (const char* strategy : {"mirrored", "central_storage"}) {
    for (int replicas : {2, 3}) {
      const std::string strategy_name = strategy;
      CAPTURE(strategy_name);
      CAPTURE(replicas);
      const auto [losses, got] = train(program, strategy, replicas, batches);
      for (size_t step = 0; step < batches.size(); ++step) CHECK(losses[step] == doctest::Approx(want_losses[step]).epsilon(1e-12));
      for (const auto& [name, value] : want) check_within(name, got.at(name), value, 1e-12);
    }
  }
}

TEST_CASE("UserOps.train_under_every_strategy_and_round_trip_through_a_model_file") {
  // Built with the C++ API and minimize, in the program's own registry.
  serialization::Model model = asinh_model();
  TrainingProgram program;
  program.graph = model.graph;
  program.ops = &tables().schemas;
  graph::Builder b(program.graph, tables().schemas);
  auto train_op = ops::minimize(b, model.signature.loss, ops::Optimizer::momentum_sgd(0.5, 0.9));
  REQUIRE_MESSAGE(train_op.ok(), train_op.status().to_string());
  program.signature = {.loss = model.signature.loss, .correct = model.signature.metric("correct"), .train = train_op->train,
                       .learning_rate = train_op->learning_rate};
  program.variables_and_gradients = train_op->variables_and_gradients;
  program.loss_gradient = train_op->loss_gradient;
  program.step_state = train_op->step_state;
  check_strategies_train_as_one_device(program);

  // Saved, and loaded with the registry that has Asinh; without it, the loader names the op.
  const std::string path = (std::filesystem::temp_directory_path() / ("mirra_user_op_" + std::to_string(::getpid()) + ".mirra")).string();
  REQUIRE(serialization::save_model(model, path).ok());
  auto refused = serialization::load_model(path, ops::registry());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("'Asinh'") != std::string::npos);
  auto loaded = serialization::load_model(path, tables().schemas);
  std::filesystem::remove(path);
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());

  // The runner's model program over the loaded file: the optimizer and training passes in that
  // registry, and the strategies again.
  auto from_file = runner::build_model_program(*loaded, {.ops = &tables().schemas});
  REQUIRE_MESSAGE(from_file.ok(), from_file.status().to_string());
  CHECK(from_file->program.ops == &tables().schemas);
  check_strategies_train_as_one_device(from_file->program);
}

}  // namespace
}  // namespace mirra::strategies::test
