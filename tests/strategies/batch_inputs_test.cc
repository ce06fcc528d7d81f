// The signature's batch inputs (TrainingGraph::batch_inputs): only the declared placeholders are
// split between the replicas, so a placeholder of unknown length that is not a batch (per-class
// weights fed every step) reaches every replica whole, and Mirrored and CentralStorage over 2 and 3
// replicas train as one device. A declared name that is no placeholder is refused, and so is a
// signature whose features are not among its batch inputs.
#include <doctest/doctest.h>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;

constexpr int64_t kFeatures = 4, kClasses = 3;

// Cross-entropy weighted by the mean of the fed class weights (a scale that does not depend on the
// batch), with the batch inputs declared or not.
TrainingProgram build(std::vector<std::string> batch_inputs) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/9);
  const ValueRef x = ops::placeholder(b, "images", DType::f64, {-1, kFeatures});
  const ValueRef weights = ops::placeholder(b, "class_weights", DType::f64, {-1});
  const ValueRef w = ops::variable(b, "w", {kFeatures, kClasses}, ops::Initializer::glorot_uniform(), DType::f64);
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, x, w));
  const ValueRef loss = ops::mul(b, objective.loss, ops::reduce_mean(b, weights));
  auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1));
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.batch_inputs = std::move(batch_inputs), .loss = loss, .correct = objective.correct,
                       .train = train->train, .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

struct Trained {
  std::vector<double> losses;
  std::vector<double> w;
};

Trained train(const TrainingProgram& program, const std::string& strategy, int replicas) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  runtime::Random rng(41);
  Trained out;
  for (const int64_t size : {6, 5, 2}) {
    std::vector<double> x(static_cast<size_t>(size * kFeatures));
    std::vector<int64_t> labels(static_cast<size_t>(size));
    for (double& v : x) v = 2 * rng.uniform() - 1;
    for (int64_t& v : labels) v = static_cast<int64_t>(rng.below(kClasses));
    const std::vector<double> class_weights = {0.5, 1.0, 2.0, 4.0, 8.0};  // not a batch: 5 of them, fed whole
    auto step = session.run(
        {{"images", runtime::Tensor::from<double>(runtime::TensorShape({size, kFeatures}), std::span<const double>(x))},
         {"labels", runtime::Tensor::from<int64_t>(runtime::TensorShape({size}), std::span<const int64_t>(labels))},
         {"class_weights", runtime::Tensor::from<double>(runtime::TensorShape({5}), std::span<const double>(class_weights))}},
        {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    out.losses.push_back((*step)[0].values<double>()[0]);
  }
  const auto variables = float_variables(session);
  out.w = variables.count("w") > 0 ? variables.at("w") : variables.at("replica_0/w");
  return out;
}

TEST_CASE("Strategies.split_only_the_declared_batch_inputs") {
  const TrainingProgram program = build({"images", "labels"});
  const Trained reference = train(program, "one_device", 1);
  for (const char* strategy : {"mirrored", "central_storage"}) {
    for (int replicas : {2, 3}) {
      const std::string strategy_name = strategy;
      CAPTURE(strategy_name);
      CAPTURE(replicas);
      const Trained got = train(program, strategy, replicas);
      for (size_t step = 0; step < got.losses.size(); ++step) {
        CHECK(got.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-12));
      }
      check_within("w", got.w, reference.w, 1e-12);
    }
  }
}

TEST_CASE("Strategies.refuse_batch_inputs_that_are_not_placeholders_or_leave_out_the_features") {
  auto made = make_strategy({.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::cpu, 2)});
  REQUIRE(made.ok());
  auto refused = (*made)->distribute(build({"images", "w"}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "replicate: batch input 'w' is not a placeholder with a batch dim");
  refused = (*made)->distribute(build({"labels"}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "replicate: 'images' is not a batch input (the signature's batch inputs)");
}

}  // namespace
}  // namespace mirra::strategies::test
