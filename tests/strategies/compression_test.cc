// bf16 all-reduce (all_reduce.compression: bf16): Mirrored over 2 and 3 replicas casts each f32
// gradient to bf16 on its replica, all-reduces the bf16 buckets and widens the sums back there; the
// replicas stay bitwise equal after every step, and training follows uncompressed Mirrored within
// bf16's rounding (8 steps of the small CNN, momentum and Adam). On cpu_async devices (the GPU's
// model) the bf16 buckets take each of the GPU's paths: among devices (an AllReduce rank each; NCCL between
// GPUs), on one device's memory, and both (hierarchical). f64 gradients are not compressed. What
// cannot compress is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "strategies/all_reduce_plan.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

// Mirrored over `replicas` devices of `kind`, `logical_per_device` of them sharing each one's memory.
TrainingProgram mirrored(const TrainingProgram& program, int replicas, const std::string& compression,
                         graph::DeviceKind kind = graph::DeviceKind::cpu, int logical_per_device = 1,
                         AllReducePath path = AllReducePath::host) {
  StrategyConfig config{.strategy = "mirrored", .devices = devices_of(kind, replicas), .logical_gpus_per_gpu = logical_per_device};
  config.all_reduce.compression = compression;
  auto strategy = make_strategy(config);
  REQUIRE(strategy.ok());
  CHECK((*strategy)->all_reduce_plan().path == path);
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  return std::move(*distributed);
}

// Replica 0's trained variables (no slots), checking after every step that every replica's copy of
// every variable and slot is bitwise equal to replica 0's.
std::map<std::string, std::vector<double>> train(const TrainingProgram& program, const std::vector<Batch>& batches, int replicas,
                                                 int logical_per_device = 1) {
  std::map<std::string, std::vector<double>> trained;
  for (auto& [name, value] : train_checking_replicas(program, batches, replicas, /*check_slots=*/true, logical_per_device)) {
    if (name.starts_with("replica_0/") && !is_slot(name)) trained[name] = std::move(value);
  }
  return trained;
}

// The dtypes of what the graph's all-reduce ranks sum; none without.
std::vector<graph::DType> all_reduced_dtypes(const TrainingProgram& program) {
  std::vector<graph::DType> dtypes;
  for (const graph::Node& node : program.graph.nodes()) {
    if (node.op != "AllReduce") continue;
    for (graph::ValueRef input : node.inputs) dtypes.push_back(program.graph.type(input).dtype);
  }
  return dtypes;
}

bool all_bf16(const std::vector<graph::DType>& dtypes) {
  return !dtypes.empty() && std::all_of(dtypes.begin(), dtypes.end(), [](graph::DType d) { return d == graph::DType::bf16; });
}

TEST_CASE("Bf16AllReduce.follows_uncompressed_training") {
  for (const ops::Optimizer& optimizer : {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.001)}) {
    const TrainingProgram program = build_program("small_cnn", optimizer);
    const std::vector<Batch> batches = random_batches("small_cnn", 61, 8, 41);
    for (int replicas : {2, 3}) {
      CAPTURE(optimizer.kind);
      CAPTURE(replicas);
      const TrainingProgram compressed = mirrored(program, replicas, "bf16");
      CHECK(all_bf16(all_reduced_dtypes(compressed)));
      check_follows_within_bf16(train(compressed, batches, replicas), train(mirrored(program, replicas, "none"), batches, replicas));
    }
  }
}

TEST_CASE("Bf16AllReduce.on_cpu_async_devices_along_each_path") {
  const TrainingProgram program = build_program("small_cnn", ops::Optimizer::adam(0.001));
  const std::vector<Batch> batches = random_batches("small_cnn", 61, 8, 43);
  struct Case {
    int replicas, logical_per_device;
    AllReducePath path;
  };
  for (const Case& c : {Case{2, 1, AllReducePath::peer}, Case{2, 2, AllReducePath::on_device}, Case{4, 2, AllReducePath::hierarchical}}) {
    CAPTURE(c.replicas);
    CAPTURE(c.logical_per_device);
    const auto on = [&](const std::string& compression) {
      return mirrored(program, c.replicas, compression, graph::DeviceKind::cpu_async, c.logical_per_device, c.path);
    };
    const TrainingProgram compressed = on("bf16");
    CHECK(all_bf16(all_reduced_dtypes(compressed)));
    check_follows_within_bf16(train(compressed, batches, c.replicas, c.logical_per_device),
                              train(on("none"), batches, c.replicas, c.logical_per_device));
  }
}

TEST_CASE("Bf16AllReduce.leaves_f64_gradients_uncompressed") {
  const std::vector<graph::DType> dtypes = all_reduced_dtypes(mirrored(build_program("mlp", ops::Optimizer::sgd(0.05)), 2, "bf16"));
  CHECK(!dtypes.empty());
  CHECK(std::all_of(dtypes.begin(), dtypes.end(), [](graph::DType d) { return d == graph::DType::f64; }));
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
  CHECK(parse_strategy_config(R"({"devices": ["gpu:0", "gpu:1"], "all_reduce": {"compression": "bf16"}})", "c.json").ok());
}

}  // namespace
}  // namespace mirra::strategies::test
