// Batch normalisation under the strategies, in per-replica mode (TensorFlow's default): each replica
// normalises with the statistics of its own share of the batch, so the loss differs from one
// device's, and the moving statistics become the mean over the replicas of what each computed (an
// ON_READ/MEAN variable: under Mirrored each replica keeps its own moving averages and the
// signature's synchronize target averages them, one value in every replica's copy). Checked against
// the statistics of each share computed here, under Mirrored and CentralStorage over 2 and 3
// replicas, even and uneven shares, and over several steps against CentralStorage, which averages at
// every write. Evaluation normalises with the moving statistics, so what it reports does not depend
// on how the data is batched or split.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/data/fashion_mnist.h"
#include "runtime/training/trainer.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;

constexpr int64_t kHeight = 2, kWidth = 2, kChannels = 3, kClasses = 3;
constexpr double kMomentum = 0.9;

// images [?, 2, 2, 3] -> batch normalisation -> ReLU -> dense 3, in float64 (or `dtype`).
TrainingProgram build(DType dtype = DType::f64) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/4);
  const ValueRef images = ops::placeholder(b, "images", dtype, {-1, kHeight, kWidth, kChannels});
  ops::BatchNormalization bn;
  {
    auto scope = b.scope("bn");
    bn = ops::batch_normalization(b, images, {.momentum = kMomentum});
  }
  const ValueRef flat = ops::reshape(b, ops::relu(b, bn.y), {-1, kHeight * kWidth * kChannels});
  const ValueRef w =
      ops::variable(b, "dense/w", {kHeight * kWidth * kChannels, kClasses}, ops::Initializer::glorot_uniform(), dtype);
  const ops::ClassifierObjective objective = ops::classifier_objective(b, ops::matmul(b, flat, w));
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.1, 0.9), {.state_updates = bn.state_updates});
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.loss = objective.loss, .correct = objective.correct, .train = train->train,
                       .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

// The program with its batch normalisation and ReLU fused, forward and backward, as the runner
// trains it (ops::fuse_for_training).
TrainingProgram fused(TrainingProgram program) {
  REQUIRE(ops::fuse_batch_norm_activation(program.graph) == 1);
  REQUIRE(ops::fuse_batch_norm_grad_activation(program.graph) == 1);
  return program;
}

Batch batch_of(int64_t size, uint64_t seed) {
  runtime::Random rng(seed);
  std::vector<double> x(static_cast<size_t>(size * kHeight * kWidth * kChannels));
  std::vector<int64_t> labels(static_cast<size_t>(size));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3 * rng.uniform() - 1 + 0.5 * static_cast<double>(i % kChannels);
  for (int64_t& l : labels) l = static_cast<int64_t>(rng.below(kClasses));
  return {runtime::Tensor::from<double>(runtime::TensorShape({size, kHeight, kWidth, kChannels}), std::span<const double>(x)),
          runtime::Tensor::from<int64_t>(runtime::TensorShape({size}), std::span<const int64_t>(labels))};
}

// The mean and unbiased variance per channel of examples [first, first + count) of `images`.
struct Statistics {
  std::vector<double> mean, variance;
};
Statistics statistics_of(const runtime::Tensor& images, int64_t first, int64_t count) {
  const std::span<const double> x = images.values<double>();
  const int64_t per_example = kHeight * kWidth * kChannels;
  const double n = static_cast<double>(count * kHeight * kWidth);
  Statistics s{std::vector<double>(kChannels, 0.0), std::vector<double>(kChannels, 0.0)};
  for (int64_t i = first * per_example; i < (first + count) * per_example; ++i) s.mean[static_cast<size_t>(i % kChannels)] += x[static_cast<size_t>(i)];
  for (double& m : s.mean) m /= n;
  for (int64_t i = first * per_example; i < (first + count) * per_example; ++i) {
    const double d = x[static_cast<size_t>(i)] - s.mean[static_cast<size_t>(i % kChannels)];
    s.variance[static_cast<size_t>(i % kChannels)] += d * d;
  }
  for (double& v : s.variance) v /= n - 1;
  return s;
}

// The moving statistics after one step from (0, 1) over `replicas` shares of `batch`: each replica
// moves them towards its own share's statistics, and the replicas' results are averaged.
Statistics expected_moving_statistics(const Batch& batch, int replicas) {
  Statistics moving{std::vector<double>(kChannels, 0.0), std::vector<double>(kChannels, 0.0)};
  int64_t first = 0;
  for (int r = 0; r < replicas; ++r) {
    const int64_t share = ops::replica_share(batch.images.dim(0), replicas, r);
    const Statistics s = statistics_of(batch.images, first, share);
    first += share;
    for (size_t c = 0; c < kChannels; ++c) {
      moving.mean[c] += ((1 - kMomentum) * s.mean[c]) / replicas;
      moving.variance[c] += (kMomentum * 1.0 + (1 - kMomentum) * s.variance[c]) / replicas;
    }
  }
  return moving;
}

struct Stepped {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> variables;  // replica 0's, by replica-free name
  bool replicas_differed = false;  // whether the replicas' moving statistics differed before synchronize
};

Stepped steps(const TrainingProgram& program, const std::string& strategy, int replicas, const std::vector<Batch>& batches) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  Stepped out;
  for (const Batch& batch : batches) {
    auto step = session.run(feeds(*distributed, batch), {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    out.losses.push_back((*step)[0].values<double>()[0]);
  }
  out.replicas_differed =
      replicas_differ(float_variables(session), [](std::string_view plain) { return plain.starts_with("bn/moving"); });
  REQUIRE(runtime::training::synchronize_on_read(session, distributed->signature).ok());
  const std::map<std::string, std::vector<double>> variables = float_variables(session);
  for (const auto& [name, value] : variables) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0) {
      out.variables[plain] = value;
    } else if (plain.starts_with("bn/moving")) {
      const std::string variable = name;
      CAPTURE(variable);
      CHECK(value == variables.at("replica_0/" + plain));  // one value in every replica's copy
    }
  }
  return out;
}

TEST_CASE("BatchNorm.one_device_moves_the_statistics_towards_the_batch") {
  const TrainingProgram program = build();
  const Batch batch = batch_of(8, 1);
  const Stepped got = steps(program, "one_device", 1, {batch});
  const Statistics want = expected_moving_statistics(batch, 1);
  check_within("bn/moving_mean", got.variables.at("bn/moving_mean"), want.mean, 1e-12);
  check_within("bn/moving_variance", got.variables.at("bn/moving_variance"), want.variance, 1e-12);
  CHECK(got.variables.at("bn/gamma") != std::vector<double>(kChannels, 1.0));  // trained
}

TEST_CASE("BatchNorm.per_replica_statistics_differ_from_one_device_and_the_moving_statistics_are_the_replicas_mean") {
  const TrainingProgram program = build(), fused_program = fused(build());  // 3 replicas: fused
  for (const int64_t size : {8, 7}) {
    const Batch batch = batch_of(size, 2);
    const Stepped reference = steps(program, "one_device", 1, {batch});
    for (const char* strategy : {"mirrored", "central_storage"}) {
      for (int replicas : {2, 3}) {
        const std::string strategy_name = strategy;
        CAPTURE(strategy_name); CAPTURE(replicas); CAPTURE(size);
        const Stepped got = steps(replicas == 2 ? program : fused_program, strategy, replicas, {batch});
        const Statistics want = expected_moving_statistics(batch, replicas);
        check_within("bn/moving_mean", got.variables.at("bn/moving_mean"), want.mean, 1e-12);
        check_within("bn/moving_variance", got.variables.at("bn/moving_variance"), want.variance, 1e-12);
        CHECK(got.replicas_differed == (strategy_name == "mirrored"));  // averaged on read, not at each write
        // Each replica normalised with its own share's statistics, not the batch's.
        CHECK(std::abs(got.losses[0] - reference.losses[0]) > 1e-9);
        CHECK(std::abs(got.variables.at("bn/moving_variance")[0] - reference.variables.at("bn/moving_variance")[0]) > 1e-6);
      }
    }
  }
}

TEST_CASE("BatchNorm.moving_statistics_averaged_on_read_equal_those_averaged_at_every_write") {
  // Every moving average is affine in its old value and the batch's statistic, so the replicas' mean
  // of their own moving averages is the moving average of their means: Mirrored, which averages when
  // the statistics are read, trains what CentralStorage, which averages at every write, trains.
  const TrainingProgram program = build();
  std::vector<Batch> batches;
  for (int64_t size : {8, 7, 9, 6, 8}) batches.push_back(batch_of(size, static_cast<uint64_t>(size) + 10));
  for (int replicas : {2, 3}) {
    CAPTURE(replicas);
    const Stepped on_read = steps(program, "mirrored", replicas, batches);
    const Stepped every_write = steps(program, "central_storage", replicas, batches);
    CHECK(on_read.replicas_differed);
    for (size_t step = 0; step < batches.size(); ++step) {
      CHECK(on_read.losses[step] == doctest::Approx(every_write.losses[step]).epsilon(1e-12));
    }
    for (const auto& [name, value] : every_write.variables) check_within(name, on_read.variables.at(name), value, 1e-12);
  }
}

// Steps of `program` under `strategy` over `replicas` with synchronised batch normalisation: the
// loss of each step and the variables after the last (replica 0's, by replica-free name).
struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> variables;
};
Run synchronised_run(const TrainingProgram& program, const std::string& strategy, int replicas,
                     const std::vector<Batch>& batches) {
  auto made = make_strategy(
      {.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas), .sync_batch_norm = true});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  Run run;
  for (const Batch& batch : batches) {
    auto step = session.run(feeds(*distributed, batch), {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    run.losses.push_back((*step)[0].values<double>()[0]);
  }
  REQUIRE(runtime::training::synchronize_on_read(session, distributed->signature).ok());
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0) run.variables[plain] = value;
  }
  return run;
}

TEST_CASE("BatchNorm.synchronised_replicas_compute_what_one_device_computes") {
  const TrainingProgram program = build(), fused_program = fused(build());
  std::vector<Batch> batches;
  for (int64_t size : {8, 7, 61, 5, 3}) batches.push_back(batch_of(size, static_cast<uint64_t>(size)));
  const Run reference = synchronised_run(program, "one_device", 1, batches);
  for (const char* strategy : {"mirrored", "central_storage"}) {
    for (int replicas : {1, 2, 3, 4}) {
      for (bool fusion : {false, true}) {
        const std::string strategy_name = strategy;
        CAPTURE(strategy_name); CAPTURE(replicas); CAPTURE(fusion);
        const Run got = synchronised_run(fusion ? fused_program : program, strategy, replicas, batches);
        for (size_t step = 0; step < batches.size(); ++step) CHECK(got.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-12));
        for (const auto& [name, value] : reference.variables) check_within(name, got.variables.at(name), value, 1e-10);
      }
    }
  }
  // Per replica the same steps differ: the test above can fail.
  CHECK(std::abs(steps(program, "mirrored", 2, {batches[0]}).losses[0] - reference.losses[0]) > 1e-9);
}

// 40 examples of bytes, as a data set of images [2, 2, 3] normalised to [0, 1], in batches of `batch`.
runtime::data::Dataset dataset(int64_t batch) {
  runtime::Random rng(9);
  runtime::data::IdxArray images{{40, kHeight, kWidth, kChannels}, {}}, labels{{40}, {}};
  for (int i = 0; i < 40 * kHeight * kWidth * kChannels; ++i) images.values.push_back(static_cast<uint8_t>(rng.below(256)));
  for (int i = 0; i < 40; ++i) labels.values.push_back(static_cast<uint8_t>(rng.below(kClasses)));
  auto made = runtime::data::labelled_images_dataset({std::move(images), std::move(labels)}, "random bytes",
                                                     {kHeight, kWidth, kChannels}, {.batch_size = batch, .shuffle = false});
  REQUIRE_MESSAGE(made.ok(), made.status().to_string());
  return std::move(*made);
}

TEST_CASE("BatchNorm.evaluation_normalises_with_the_moving_statistics") {
  const TrainingProgram program = build(DType::f32);
  for (const auto& [strategy, replicas] : {std::pair{"one_device", 1}, std::pair{"mirrored", 2}, std::pair{"central_storage", 3}}) {
    const std::string strategy_name = strategy;
    CAPTURE(strategy_name);
    auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    REQUIRE(distributed->signature.inference.has_value());
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
    runtime::training::Trainer trainer(session, distributed->signature, {.epochs = 2});
    const runtime::data::Dataset train = dataset(8);
    REQUIRE(trainer.fit(train).ok());
    // Twice the same data in batches of 8 and of 3: the same mean loss and accuracy.
    auto by_8 = trainer.evaluate(dataset(8)), by_3 = trainer.evaluate(dataset(3));
    REQUIRE(by_8.ok());
    REQUIRE(by_3.ok());
    CHECK(by_8->mean_loss == doctest::Approx(by_3->mean_loss).epsilon(1e-6));
    CHECK(by_8->accuracy == by_3->accuracy);
    // With the batch's statistics (the training values) the batching shows.
    runtime::training::TrainingGraph training_values = distributed->signature;
    training_values.inference.reset();
    runtime::training::Trainer batch_statistics(session, training_values);
    auto training_by_8 = batch_statistics.evaluate(dataset(8)), training_by_3 = batch_statistics.evaluate(dataset(3));
    REQUIRE(training_by_8.ok());
    REQUIRE(training_by_3.ok());
    CHECK(std::abs(training_by_8->mean_loss - training_by_3->mean_loss) > 1e-3);
  }
}

}  // namespace
}  // namespace mirra::strategies::test
