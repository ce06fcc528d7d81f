// The signature's batch inputs (TrainingGraph::batch_inputs): only the declared placeholders are
// split between the replicas, so a placeholder of unknown length that is not a batch (per-class
// weights fed every step) reaches every replica whole, and Mirrored and CentralStorage over 2 and 3
// replicas train as one device; a time-major input ([time, batch, features], batch axis 1) is split
// along its axis and trains as one device too. A declared name that is no placeholder is refused,
// and so are an axis the input does not have and a signature whose features are not among its batch
// inputs. The declaration is kept in model files.
#include <doctest/doctest.h>

#include "serialization/model_file.h"
#include "tests/strategies/strategy_test_util.h"
#include "tools/mirra/model_program.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;
using runtime::training::BatchInput;

constexpr int64_t kFeatures = 4, kClasses = 3;

// Cross-entropy weighted by the mean of the fed class weights (a scale that does not depend on the
// batch), with the batch inputs declared or not.
TrainingProgram build(std::vector<BatchInput> batch_inputs) {
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
  const TrainingProgram program = build({{"images"}, {"labels"}});
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

constexpr int64_t kTime = 3;

// A time-major classifier as a model file holds it: images [time, batch, features], each time step
// weighed by a trained factor, averaged over time, then a dense layer and cross-entropy.
serialization::Model time_major_model() {
  serialization::Model model;
  graph::Builder b(model.graph, ops::registry(), /*seed=*/11);
  const ValueRef x = ops::placeholder(b, "images", DType::f64, {kTime, -1, kFeatures});
  const ValueRef steps = ops::variable(b, "steps", {kTime, 1, 1}, ops::Initializer::glorot_uniform(), DType::f64);
  const ValueRef w = ops::variable(b, "w", {kFeatures, kClasses}, ops::Initializer::glorot_uniform(), DType::f64);
  const ValueRef pooled = ops::reduce_mean(b, ops::mul(b, x, steps), {0});
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, pooled, w));
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  model.signature = {.batch_inputs = {{"images", 1}, {"labels", 0}},
                     .loss = objective.loss,
                     .metrics = {{"correct", objective.correct}},
                     .optimizer = {.kind = "sgd", .hyper_parameters = {{"learning_rate", 0.5}}}};
  return model;
}

// The same model built with the C++ API.
TrainingProgram build_time_major() {
  const serialization::Model model = time_major_model();
  TrainingProgram program;
  program.graph = model.graph;
  graph::Builder b(program.graph, ops::registry());
  auto train = ops::minimize(b, model.signature.loss, ops::Optimizer::sgd(0.5));
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.batch_inputs = {{"images", 1}, {"labels", 0}}, .loss = model.signature.loss,
                       .correct = model.signature.metric("correct"), .train = train->train,
                       .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

struct TrainedTimeMajor {
  std::vector<double> losses, corrects;
  std::map<std::string, std::vector<double>> variables;  // replica-free names
};

TrainedTimeMajor train_time_major(const TrainingProgram& program, const std::string& strategy, int replicas) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  runtime::Random rng(43);
  TrainedTimeMajor out;
  for (const int64_t size : {7, 5, 2, 4}) {
    std::vector<double> x(static_cast<size_t>(kTime * size * kFeatures));
    std::vector<int64_t> labels(static_cast<size_t>(size));
    for (double& v : x) v = 2 * rng.uniform() - 1;
    for (int64_t& v : labels) v = static_cast<int64_t>(rng.below(kClasses));
    auto step = session.run(
        {{"images", runtime::Tensor::from<double>(runtime::TensorShape({kTime, size, kFeatures}), std::span<const double>(x))},
         {"labels", runtime::Tensor::from<int64_t>(runtime::TensorShape({size}), std::span<const int64_t>(labels))}},
        {distributed->signature.loss, distributed->signature.correct}, {distributed->signature.train});
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    out.losses.push_back((*step)[0].values<double>()[0]);
    out.corrects.push_back((*step)[1].values<float>()[0]);
  }
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0) out.variables[plain] = value;
  }
  return out;
}

void check_time_major_trains_as_one_device(const TrainingProgram& program, const TrainedTimeMajor& reference) {
  for (const auto& [strategy, replicas] : {std::pair{"mirrored", 2}, std::pair{"mirrored", 3}, std::pair{"central_storage", 2}}) {
    const std::string strategy_name = strategy;
    const int replica_count = replicas;  // a structured binding cannot be captured (C++20)
    CAPTURE(strategy_name);
    CAPTURE(replica_count);
    const TrainedTimeMajor got = train_time_major(program, strategy, replicas);
    for (size_t step = 0; step < got.losses.size(); ++step) {
      CHECK(got.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-12));
      CHECK(got.corrects[step] == reference.corrects[step]);
    }
    for (const char* variable : {"steps", "w"}) check_within(variable, got.variables.at(variable), reference.variables.at(variable), 1e-12);
  }
}

TEST_CASE("Strategies.split_a_time_major_batch_along_its_axis") {
  const TrainingProgram program = build_time_major();
  check_time_major_trains_as_one_device(program, train_time_major(program, "one_device", 1));
}

// The declaration travels in the model file: the runner's program from the loaded file splits the
// time-major batch as the C++ API's does. Without it, the implicit rule finds no batch input.
TEST_CASE("Strategies.model_files_keep_the_batch_inputs") {
  serialization::Model model = time_major_model();
  auto bytes = serialization::serialize_model(model);
  REQUIRE(bytes.ok());
  auto loaded = serialization::parse_model({bytes->data(), bytes->size()}, ops::registry());
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(loaded->signature.batch_inputs == model.signature.batch_inputs);
  auto from_file = runner::build_model_program(*loaded);
  REQUIRE_MESSAGE(from_file.ok(), from_file.status().to_string());
  CHECK(from_file->program.signature.batch_inputs == std::vector<BatchInput>{{"images", 1}, {"labels", 0}});
  check_time_major_trains_as_one_device(from_file->program, train_time_major(build_time_major(), "one_device", 1));

  model.signature.batch_inputs.clear();
  bytes = serialization::serialize_model(model);
  REQUIRE(bytes.ok());
  loaded = serialization::parse_model({bytes->data(), bytes->size()}, ops::registry());
  REQUIRE(loaded.ok());
  from_file = runner::build_model_program(*loaded);
  REQUIRE(from_file.ok());
  auto made = make_strategy({.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::cpu, 2)});
  REQUIRE(made.ok());
  const auto refused = (*made)->distribute(from_file->program);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "replicate: 'images' is not a batch input (dim 0 unknown)");
}

TEST_CASE("Strategies.refuse_batch_inputs_that_are_not_placeholders_or_leave_out_the_features") {
  auto made = make_strategy({.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::cpu, 2)});
  REQUIRE(made.ok());
  auto refused = (*made)->distribute(build({{"images"}, {"w"}}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "replicate: batch input 'w' is not a placeholder with a batch dim");
  refused = (*made)->distribute(build({{"images", 2}, {"labels"}}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "replicate: batch input 'images' has no axis 2 (it has 2)");
  refused = (*made)->distribute(build({{"labels"}}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "replicate: 'images' is not a batch input (the signature's batch inputs)");
}

}  // namespace
}  // namespace mirra::strategies::test
