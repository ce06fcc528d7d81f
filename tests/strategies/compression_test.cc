// bf16 all-reduce (all_reduce.compression: bf16): Mirrored over 2 and 3 replicas casts each f32
// gradient to bf16 on its replica, all-reduces the bf16 buckets and widens the sums back there; the
// replicas stay bitwise equal after every step, and training follows uncompressed Mirrored within
// bf16's rounding (8 steps of the small CNN, momentum and Adam). f64 gradients are not compressed.
// What cannot compress is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

TrainingProgram mirrored(const TrainingProgram& program, int replicas, const std::string& compression) {
  StrategyConfig config{.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::cpu, replicas)};
  config.all_reduce.compression = compression;
  auto strategy = make_strategy(config);
  REQUIRE(strategy.ok());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  return std::move(*distributed);
}

// Replica 0's trained variables (no slots), checking after every step that every replica's copy of
// every variable and slot is bitwise equal to replica 0's.
std::map<std::string, std::vector<double>> train(const TrainingProgram& program, const std::vector<Batch>& batches, int replicas) {
  std::map<std::string, std::vector<double>> trained;
  for (auto& [name, value] : train_checking_replicas(program, batches, replicas, /*check_slots=*/true)) {
    if (name.starts_with("replica_0/") && !is_slot(name)) trained[name] = std::move(value);
  }
  return trained;
}

TEST_CASE("Bf16AllReduce.follows_uncompressed_training") {
  for (const ops::Optimizer& optimizer : {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.001)}) {
    const TrainingProgram program = build_program("small_cnn", optimizer);
    const std::vector<Batch> batches = random_batches("small_cnn", 61, 8, 41);
    for (int replicas : {2, 3}) {
      CAPTURE(optimizer.kind);
      CAPTURE(replicas);
      const TrainingProgram compressed = mirrored(program, replicas, "bf16");
      int bf16_all_reduces = 0;
      for (const graph::Node& node : compressed.graph.nodes()) {
        if (node.op != "AllReduce") continue;
        for (graph::ValueRef input : node.inputs) CHECK(compressed.graph.type(input).dtype == graph::DType::bf16);
        ++bf16_all_reduces;
      }
      CHECK(bf16_all_reduces > 0);
      const auto want = train(mirrored(program, replicas, "none"), batches, replicas);
      const auto got = train(compressed, batches, replicas);
      double largest_difference = 0;
      for (const auto& entry : want) {
        const std::string& name = entry.first;  // not a structured binding: CAPTURE's lambda takes it
        const std::vector<double>& values = entry.second;
        CAPTURE(name);
        double scale = 0, difference = 0;
        const std::vector<double>& mine = got.at(name);
        for (size_t i = 0; i < values.size(); ++i) {
          scale = std::max(scale, std::abs(values[i]));
          difference = std::max(difference, std::abs(mine[i] - values[i]));
        }
        // bf16 keeps 8 bits of each gradient: the variables drift by a small part of their size.
        CHECK(difference <= 1e-2 * scale);
        largest_difference = std::max(largest_difference, difference);
      }
      CHECK(largest_difference > 0);  // the gradients were rounded
    }
  }
}

TEST_CASE("Bf16AllReduce.leaves_f64_gradients_uncompressed") {
  const TrainingProgram compressed = mirrored(build_program("mlp", ops::Optimizer::sgd(0.05)), 2, "bf16");
  for (const graph::Node& node : compressed.graph.nodes()) {
    if (node.op != "AllReduce") continue;
    for (graph::ValueRef input : node.inputs) CHECK(compressed.graph.type(input).dtype == graph::DType::f64);
  }
}

TEST_CASE("Bf16AllReduce.refused_where_it_does_not_apply") {
  CHECK(parse_strategy_config(R"({"strategy": "central_storage", "all_reduce": {"compression": "bf16"}})", "c.json")
            .status()
            .message() ==
        "c.json: 'all_reduce.compression' applies to the gradient all-reduce of mirrored and multi_worker_mirrored, not "
        "to central_storage");
  CHECK(parse_strategy_config(R"({"shard_optimizer_state": true, "all_reduce": {"compression": "bf16"}})", "c.json")
            .status()
            .message() ==
        "c.json: 'all_reduce.compression' does not apply with shard_optimizer_state, whose gradients are reduce-scattered");
  CHECK(parse_strategy_config(R"({"all_reduce": {"compression": "fp8"}})", "c.json").status().message() ==
        "c.json: 'all_reduce.compression' must be \"none\" or \"bf16\"");
  CHECK(parse_strategy_config(R"({"devices": ["gpu:0"], "all_reduce": {"compression": "bf16"}})", "c.json")
            .status()
            .message() == "c.json: 'all_reduce.compression' runs on CPU devices for now, not on gpu:0");
}

}  // namespace
}  // namespace mirra::strategies::test
