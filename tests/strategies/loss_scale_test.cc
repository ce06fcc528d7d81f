// Loss scaling under every strategy: N replicas skip the step one device skips (the verdict is taken
// on the aggregated gradients, so replicas agree even when one replica's share alone overflowed),
// count the same steps, move the scale alike and end with one device's variables. With gradient
// accumulation an overflow in one micro-batch skips its whole update, as one step on the joined
// micro-batches would, and the next update starts from clean accumulators.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

struct Outcome {
  std::map<std::string, std::vector<double>> variables;
  std::vector<float> scales;  // after each step
  int64_t iterations = 0;
};

// `prefix`: where the scale is, "replica_0/" when each replica has its own.
Outcome train(const TrainingProgram& program, const std::vector<Batch>& batches, const std::string& prefix) {
  runtime::Session session(program.graph, ops::kernels(), {.threads = 2});
  Outcome out;
  for (const Batch& batch : batches) {
    REQUIRE(session.run(feeds(program, batch), {}, {program.signature.train}).ok());
    out.scales.push_back(session.read_variable(prefix + std::string(ops::kLossScaleVariable))->values<float>()[0]);
  }
  out.iterations = session.read_variable(std::string(ops::kIterationsVariable))->values<int64_t>()[0];
  for (auto& [name, values] : float_variables(session)) {
    int replica = 0;
    const std::string_view free = replica_free_name(name, &replica);
    if (replica <= 0) out.variables[std::string(free)] = values;  // replica 0's copy, or the one copy
  }
  return out;
}

TEST_CASE("LossScaling.strategies_skip_the_steps_one_device_skips") {
  const ops::MinimizeOptions options{.loss_scaling = ops::LossScaling{.initial_scale = 32768, .growth_steps = 3}};
  for (const ops::Optimizer& optimizer : {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.01)}) {
    CAPTURE(optimizer.kind);
    const TrainingProgram program = build_program("small_cnn", optimizer, options);
    std::vector<Batch> batches = random_batches("small_cnn", 61, 12, 5);
    // An infinite pixel in the first example of step 4 (replica 0's share): that step's gradients
    // overflow everywhere once aggregated.
    batches[4].images.mutable_data<float>()[0] = std::numeric_limits<float>::infinity();
    const Outcome reference = train(program, batches, "");
    CHECK(reference.scales == std::vector<float>{32768, 32768, 65536, 65536, 32768, 32768, 32768, 65536, 65536, 65536,
                                                 131072, 131072});
    CHECK(reference.iterations == static_cast<int64_t>(batches.size()) - 1);
    for (const std::pair<const char*, int>& run : {std::pair{"mirrored", 2}, std::pair{"mirrored", 3}, std::pair{"central_storage", 2}}) {
      const std::string strategy = run.first;  // not a structured binding: CAPTURE takes them
      const int replicas = run.second;
      CAPTURE(strategy); CAPTURE(replicas);
      auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
      REQUIRE(made.ok());
      auto distributed = (*made)->distribute(program);
      REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
      const Outcome got = train(*distributed, batches, strategy == "mirrored" ? "replica_0/" : "");
      CHECK(got.scales == reference.scales);
      CHECK(got.iterations == reference.iterations);
      for (const auto& [name, values] : reference.variables) check_close(name, got.variables.at(name), values);
    }
  }
}

TEST_CASE("LossScaling.with_gradient_accumulation") {
  const ops::MinimizeOptions options{.loss_scaling = ops::LossScaling{.initial_scale = 32768, .growth_steps = 2}};
  TrainingProgram program = build_program("small_cnn", ops::Optimizer::adam(0.01), options);
  constexpr int kMicroBatches = 3, kUpdates = 5;
  std::vector<Batch> micro = random_batches("small_cnn", 20, kMicroBatches * kUpdates, 9);
  // An infinite pixel in the second micro-batch of update 1.
  micro[kMicroBatches + 1].images.mutable_data<float>()[0] = std::numeric_limits<float>::infinity();
  std::vector<Batch> joined;
  for (int u = 0; u < kUpdates; ++u) {
    joined.push_back(join({micro.begin() + u * kMicroBatches, micro.begin() + (u + 1) * kMicroBatches}));
  }
  const Outcome reference = train(program, joined, "");
  CHECK(reference.scales == std::vector<float>{32768, 16384, 16384, 32768, 32768});
  CHECK(reference.iterations == kUpdates - 1);

  program.accumulate_gradients = true;
  for (int replicas : {1, 2}) {
    CAPTURE(replicas);
    StrategyConfig config{.strategy = replicas == 1 ? "one_device" : "mirrored",
                          .devices = devices_of(graph::DeviceKind::cpu, replicas)};
    auto made = make_strategy(config);
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
    const std::string scale = "replica_0/" + std::string(ops::kLossScaleVariable);
    std::vector<float> scales;
    for (size_t i = 0; i < micro.size(); ++i) {
      const bool update = i % kMicroBatches == kMicroBatches - 1;
      REQUIRE(session.run(feeds(*distributed, micro[i]), {},
                          {update ? distributed->signature.train : distributed->signature.accumulate}).ok());
      if (update) scales.push_back(session.read_variable(scale)->values<float>()[0]);
    }
    CHECK(scales == reference.scales);
    CHECK(session.read_variable(std::string(ops::kIterationsVariable))->values<int64_t>()[0] == reference.iterations);
    for (auto& [name, values] : float_variables(session)) {
      int replica = 0;
      const std::string free(replica_free_name(name, &replica));
      if (free.starts_with("accumulate/")) {
        for (double v : values) CHECK(v == 0.0);  // cleared after every update, the overflowed one too
      } else if (replica <= 0 && reference.variables.contains(free)) {
        check_close(free, values, reference.variables.at(free));
      }
    }
  }
}

}  // namespace
}  // namespace mirra::strategies::test
