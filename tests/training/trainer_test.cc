// Trainer on small synthetic data: it runs the epochs or steps asked for, reports every step, writes
// the scheduled learning rate, evaluates exactly over a partial last batch, accumulates gradients over
// several batches per step, fetches watched values with every k-th step, refuses a placeholder its
// batches do not feed before the first step, and a classifier learns; on a logical CPU device and on
// an asynchronous one.
#include <doctest/doctest.h>

#include "ops/ops.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/random.h"
#include "runtime/session.h"
#include "runtime/training/trainer.h"
#include "strategies/strategy.h"

namespace mirra::runtime::training {
namespace {

// Two Gaussian blobs in 4-D as bytes (class c centred at 96 + 64 c), and a 4-8-2 MLP.
struct Blobs {
  graph::Graph graph;
  TrainingGraph names;
  ops::TrainOp train;
  data::IdxArray examples{{0, 4}, {}}, labels{{0}, {}};
};

std::unique_ptr<Blobs> make_blobs(int64_t n, const ops::Optimizer& optimizer) {
  auto blobs = std::make_unique<Blobs>();
  graph::Builder b(blobs->graph, ops::registry(), 3);
  auto x = ops::placeholder(b, "images", graph::DType::f32, {-1, 4});
  auto w1 = ops::variable(b, "w1", {4, 8}, ops::Initializer::glorot_uniform());
  auto w2 = ops::variable(b, "w2", {8, 2}, ops::Initializer::glorot_uniform());
  auto logits = ops::matmul(b, ops::relu(b, ops::matmul(b, x, w1)), w2);
  const ops::ClassifierObjective objective = ops::classifier_objective(b, logits);
  auto train = ops::minimize(b, objective.loss, optimizer);
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  blobs->names = {.loss = objective.loss, .correct = objective.correct, .train = train->train,
                  .learning_rate = train->learning_rate};
  blobs->train = *train;
  Random rng(8);
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 2);
    for (int d = 0; d < 4; ++d) {
      blobs->examples.values.push_back(static_cast<uint8_t>(std::clamp(96.0 + 64.0 * c + 20.0 * rng.normal(), 0.0, 255.0)));
    }
    blobs->labels.values.push_back(static_cast<uint8_t>(c));
  }
  blobs->examples.dims = {n, 4};
  blobs->labels.dims = {n};
  return blobs;
}

data::Dataset dataset(const Blobs& blobs, data::BatchingOptions options) {
  // (byte / 255 - 0.5) / 0.25: the blobs at -0.5 and +0.5.
  auto d = data::labelled_images_dataset({blobs.examples, blobs.labels}, "blobs", {4}, options,
                                         {.scale = {1.0 / (255.0 * 0.25)}, .shift = {-0.5 / 0.25}});
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  return std::move(*d);
}

const graph::DeviceId kDevices[] = {{graph::DeviceKind::cpu, 0}, {graph::DeviceKind::cpu_async, 0}};

void check_learns_and_reports(graph::DeviceId device) {
  CAPTURE(device.to_string());
  auto blobs = make_blobs(500, ops::Optimizer::momentum_sgd(0.1, 0.9));
  Session session(blobs->graph, ops::kernels(), {.threads = 2, .default_device = device});
  std::vector<StepMetrics> steps;
  std::vector<EpochMetrics> epochs;
  Trainer trainer(session, blobs->names,
                  {.epochs = 4, .on_step = [&](const StepMetrics& m) { steps.push_back(m); },
                   .on_epoch = [&](const EpochMetrics& m) { epochs.push_back(m); }});
  const data::Dataset train = dataset(*blobs, {.batch_size = 32, .seed = 1});
  const data::Dataset test = dataset(*blobs, {.batch_size = 64, .shuffle = false});
  auto history = trainer.fit(train, &test);
  REQUIRE_MESSAGE(history.ok(), history.status().to_string());
  REQUIRE(history->size() == 4u);
  CHECK(steps.size() == 4u * 16u);
  CHECK(epochs.size() == 4u);
  CHECK(steps.back().step == 63);
  CHECK(steps[15].examples == 500 - 15 * 32);  // the partial last batch
  CHECK(trainer.steps_taken() == 64);
  CHECK(session.read_variable("optimizer/iterations")->to_vector<int64_t>() == std::vector<int64_t>{64});
  for (const EpochMetrics& m : *history) {
    CHECK(m.examples == 500);
    CHECK(m.steps == 16);
    CHECK(m.examples_per_second > 0);
    REQUIRE(m.evaluation.has_value());
    CHECK(m.evaluation->examples == 500);
  }
  CHECK(history->front().mean_loss > history->back().mean_loss);
  CHECK(history->back().evaluation->accuracy.value() > 0.95);
}

TEST_CASE("Trainer.learns_and_reports") {
  for (const graph::DeviceId& device : kDevices) check_learns_and_reports(device);
}

// A placeholder besides the features and labels, which the Trainer never feeds, is named before the
// first step: by fit when any step needs it, by evaluate when the loss or correct count does.
TEST_CASE("Trainer.refuses_a_placeholder_the_batches_do_not_feed") {
  for (const bool loss_reads_it : {true, false}) {
    CAPTURE(loss_reads_it);
    auto blobs = std::make_unique<Blobs>();
    graph::Builder b(blobs->graph, ops::registry(), 3);
    auto x = ops::placeholder(b, "images", graph::DType::f32, {-1, 4});
    auto aux = ops::placeholder(b, "aux", graph::DType::f32, {});
    auto w = ops::variable(b, "w", {4, 2}, ops::Initializer::glorot_uniform());
    const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, x, w));
    const graph::ValueRef loss = loss_reads_it ? ops::add(b, objective.loss, aux) : objective.loss;
    auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1));
    REQUIRE(train.ok());
    // Without the loss reading it, only an extra update does.
    const graph::NodeId extra = ops::assign(b, ops::variable(b, "v", {}, ops::Initializer::zeros()), aux);
    blobs->graph.add_control_edge(extra, train->train);
    REQUIRE(b.status().ok());
    Session session(blobs->graph, ops::kernels());
    Trainer trainer(session, {.loss = loss, .correct = objective.correct, .train = train->train}, {.epochs = 1});
    const data::Dataset data = dataset(*make_blobs(16, ops::Optimizer::sgd(0.1)), {.batch_size = 8});
    auto fitted = trainer.fit(data);
    REQUIRE_FALSE(fitted.ok());
    CHECK(fitted.status().code() == graph::StatusCode::invalid_argument);
    CHECK(fitted.status().message() ==
          "the training step needs placeholder 'aux' (f32[]), which nothing feeds: the batches feed 'images', 'labels'");
    CHECK(trainer.steps_taken() == 0);
    CHECK(trainer.evaluate(data).ok() == !loss_reads_it);
  }
}

TEST_CASE("Trainer.stops_at_a_target_accuracy") {
  auto blobs = make_blobs(500, ops::Optimizer::momentum_sgd(0.1, 0.9));
  Session session(blobs->graph, ops::kernels());
  Trainer trainer(session, blobs->names, {.epochs = 50, .stop_at_accuracy = 0.9});
  const data::Dataset test = dataset(*blobs, {.batch_size = 500, .shuffle = false});
  auto history = trainer.fit(dataset(*blobs, {.batch_size = 32}), &test);
  REQUIRE(history.ok());
  CHECK(history->size() < 50u);
  CHECK(history->back().evaluation->accuracy.value() >= 0.9);
  for (size_t i = 0; i + 1 < history->size(); ++i) CHECK((*history)[i].evaluation->accuracy.value() < 0.9);
}

TEST_CASE("Trainer.evaluation_is_exact_over_a_partial_batch") {
  auto blobs = make_blobs(101, ops::Optimizer::sgd(0.1));
  Session session(blobs->graph, ops::kernels());
  Trainer trainer(session, blobs->names);
  auto whole = trainer.evaluate(dataset(*blobs, {.batch_size = 101, .shuffle = false}));
  auto batched = trainer.evaluate(dataset(*blobs, {.batch_size = 16, .shuffle = false}));
  REQUIRE(whole.ok());
  REQUIRE(batched.ok());
  CHECK(batched->examples == 101);
  CHECK(batched->accuracy.value() == doctest::Approx(whole->accuracy.value()).epsilon(1e-12));
  CHECK(batched->mean_loss == doctest::Approx(whole->mean_loss).epsilon(1e-6));
}

void check_steps_and_schedules(graph::DeviceId device) {
  CAPTURE(device.to_string());
  auto blobs = make_blobs(256, ops::Optimizer::sgd(0.4));
  Session session(blobs->graph, ops::kernels(), {.default_device = device});
  std::vector<double> rates;
  const LearningRateSchedule schedule{.kind = "step", .warmup_steps = 2, .decay_steps = 3, .decay_rate = 0.5};
  Trainer trainer(session, blobs->names,
                  {.epochs = 100, .max_steps = 7, .schedule = schedule,
                   .on_step = [&](const StepMetrics& m) { rates.push_back(m.learning_rate); }});
  auto history = trainer.fit(dataset(*blobs, {.batch_size = 64}));
  REQUIRE_MESSAGE(history.ok(), history.status().to_string());
  CHECK(history->size() == 2u);  // 4 steps in epoch 0, 3 in epoch 1
  CHECK(history->back().steps == 3);
  REQUIRE(rates.size() == 7u);
  for (int64_t step = 0; step < 7; ++step) CHECK(rates[static_cast<size_t>(step)] == doctest::Approx(schedule.at(0.4, step)));
  CHECK(session.read_variable("optimizer/learning_rate")->to_vector<float>()[0] == doctest::Approx(schedule.at(0.4, 6)));

  Trainer nothing(session, blobs->names, {.epochs = 0});
  CHECK(nothing.fit(dataset(*blobs, {})).status().message() == "train for at least one epoch or step");
  Trainer bad(session, blobs->names, {.schedule = {.kind = "cosine"}});
  CHECK(bad.fit(dataset(*blobs, {})).status().message() == "the cosine schedule needs decay_steps > 0");
}

TEST_CASE("Trainer.steps_and_schedules") {
  for (const graph::DeviceId& device : kDevices) check_steps_and_schedules(device);
}

// Gradient accumulation: 3 batches of 32 per step over 256 examples make steps of 96, 96 and 64 (an
// epoch's last step takes the batches left) and train as batches of 96 do; max_steps counts steps.
TEST_CASE("Trainer.accumulation_steps.steps_of_k_batches") {
  auto blobs = make_blobs(256, ops::Optimizer::momentum_sgd(0.1, 0.9));
  Session reference(blobs->graph, ops::kernels(), {.threads = 2});
  Trainer whole(reference, blobs->names, {.epochs = 2});
  REQUIRE(whole.fit(dataset(*blobs, {.batch_size = 96})).ok());

  const strategies::TrainingProgram program{.graph = blobs->graph,
                                            .signature = blobs->names,
                                            .variables_and_gradients = blobs->train.variables_and_gradients,
                                            .loss_gradient = blobs->train.loss_gradient,
                                            .step_state = blobs->train.step_state,
                                            .accumulate_gradients = true};
  auto strategy = strategies::make_strategy({.strategy = "one_device", .devices = {{graph::DeviceKind::cpu, 0}}});
  REQUIRE(strategy.ok());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  Session session(distributed->graph, ops::kernels(), {.threads = 2});
  std::vector<int64_t> examples;
  Trainer accumulating(session, distributed->signature,
                       {.epochs = 2, .accumulation_steps = 3, .on_step = [&](const StepMetrics& m) { examples.push_back(m.examples); }});
  auto history = accumulating.fit(dataset(*blobs, {.batch_size = 32}));
  REQUIRE_MESSAGE(history.ok(), history.status().to_string());
  CHECK(examples == std::vector<int64_t>{96, 96, 64, 96, 96, 64});
  CHECK((*history)[0].steps == 3);
  CHECK((*history)[0].examples == 256);
  for (const char* name : {"w1", "w2"}) {
    CAPTURE(name);
    const auto want = reference.read_variable(name)->to_vector<float>();
    const auto got = session.read_variable(std::string("replica_0/") + name)->to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }

  Session limited_session(distributed->graph, ops::kernels());
  Trainer limited(limited_session, distributed->signature, {.epochs = 10, .max_steps = 4, .accumulation_steps = 3});
  auto limited_history = limited.fit(dataset(*blobs, {.batch_size = 32}));
  REQUIRE(limited_history.ok());
  CHECK(limited.steps_taken() == 4);
  CHECK(limited_history->back().examples == 96);  // epoch 1: one step of 3 batches

  Trainer without_target(reference, blobs->names, {.accumulation_steps = 2});
  CHECK(without_target.fit(dataset(*blobs, {})).status().message() ==
        "accumulation_steps > 1 needs a program built with gradient accumulation");
}

// Watched values come with the update of every k-th step only, as that step computed them: under
// plain SGD a watched gradient is (w before the step - w after it) / lr.
TEST_CASE("Trainer.watch_every.fetches_the_step's_gradients_on_every_kth_step") {
  auto blobs = make_blobs(320, ops::Optimizer::sgd(0.5));
  Session session(blobs->graph, ops::kernels(), {.threads = 2});
  std::vector<graph::ValueRef> gradients;
  for (const auto& [variable, gradient] : blobs->train.variables_and_gradients) gradients.push_back(gradient);
  REQUIRE(gradients.size() == 2u);
  std::optional<Tensor> before;
  std::vector<int64_t> watched_steps;
  Trainer trainer(session, blobs->names,
                  {.epochs = 1, .watch = gradients, .watch_every = 3, .on_step = [&](const StepMetrics& m) {
                     const Tensor after = *session.read_variable("w2");
                     if (!m.watched.empty()) {
                       watched_steps.push_back(m.step + 1);
                       REQUIRE(m.watched.size() == 2u);
                       REQUIRE(before.has_value());
                       const auto g = m.watched[1].values<float>();
                       const auto w0 = before->values<float>(), w1 = after.values<float>();
                       REQUIRE(g.size() == w0.size());
                       for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx((w0[i] - w1[i]) / 0.5f).epsilon(1e-4));
                     }
                     before = after;
                   }});
  REQUIRE(trainer.fit(dataset(*blobs, {.batch_size = 32, .seed = 1})).ok());
  CHECK(watched_steps == std::vector<int64_t>{3, 6, 9});
}

}  // namespace
}  // namespace mirra::runtime::training
