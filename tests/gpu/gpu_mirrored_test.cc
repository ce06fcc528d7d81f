// Mirrored over logical GPUs of one GPU: 2 and 3 replicas on gpu:0 (each a stream of its own in the
// GPU's shared memory, their buckets summed there by one kernel), global batches 128 and 61 (uneven
// shares), momentum SGD and Adam, 20 steps: the variables equal one-GPU training within 1e-5
// relative, and every replica's variables and slots are bitwise equal to replica 0's after each step.
// The same for a GPU and the CPU side by side (summed on the host). With two GPUs, the same over
// NCCL: one replica per GPU, and two logical GPUs on each (hierarchical). Sharded optimizer state
// (on the host for logical GPUs, through NCCL's reduce-scatter between GPUs) trains as unsharded
// Mirrored; so does bf16 all-reduce within bf16's rounding (summed on the GPU for logical GPUs, in
// bf16 through NCCL between GPUs); a step that fails on one GPU fails NCCL's rank waiting on the other
// at once. State written from each replica's share (aggregations sum and mean) holds what one GPU's
// holds. Steps captured as a CUDA graph, 50 of them, end as 50 steps run one by one within 1e-6 (on
// gpu:0, and Mirrored over two logical GPUs of it).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <functional>

#include "ops/registry.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int kSteps = 20;

std::map<std::string, std::vector<double>> train(const StrategyConfig& config, const TrainingProgram& program,
                                                 const std::vector<Batch>& batches) {
  auto strategy = make_strategy(config);
  REQUIRE_MESSAGE(strategy.ok(), strategy.status().to_string());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  const int replicas = static_cast<int>(config.devices.size());
  return train_checking_replicas(*distributed, batches, replicas, /*check_slots=*/true, config.logical_gpus_per_gpu);
}

// Mirrored over `replicas` GPUs of `logical_gpus_per_gpu` per physical GPU, which sums along `path`,
// against one-GPU training.
void check_mirrored(const ops::Optimizer& optimizer, int64_t batch, int replicas, int logical_gpus_per_gpu,
                    AllReducePath path) {
  CAPTURE(optimizer.kind);
  CAPTURE(batch);
  CAPTURE(replicas);
  CAPTURE(logical_gpus_per_gpu);
  const TrainingProgram program = build_program("small_cnn", optimizer);
  const std::vector<Batch> batches = random_batches("small_cnn", batch, kSteps, 17);
  const graph::DeviceId gpu0{graph::DeviceKind::gpu, 0};
  const auto want = train({.strategy = "one_device", .devices = {gpu0}}, program, batches);
  const StrategyConfig mirrored{.strategy = "mirrored",
                                .devices = devices_of(graph::DeviceKind::gpu, replicas),
                                .logical_gpus_per_gpu = logical_gpus_per_gpu};
  auto strategy = make_strategy(mirrored);
  REQUIRE(strategy.ok());
  CHECK((*strategy)->all_reduce_plan().path == path);
  const auto got = train(mirrored, program, batches);
  for (const auto& [name, value] : want) {
    if (name.starts_with("optimizer/")) continue;
    check_close(name, got.at("replica_0/" + name), value);
  }
}

const std::vector<ops::Optimizer> kOptimizers = {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.001)};

TEST_CASE("Gpu.mirrored.logical_gpus_of_one_gpu_train_as_one_gpu") {
  for (const ops::Optimizer& optimizer : kOptimizers) {
    for (int64_t batch : {128, 61}) {
      for (int replicas : {2, 3}) check_mirrored(optimizer, batch, replicas, replicas, AllReducePath::on_device);
    }
  }
}

// Needs two GPUs (the test main leaves it out, saying so, on a machine with one): NCCL between them,
// alone and beneath two logical GPUs on each.
TEST_CASE("Gpu.mirrored.several_gpus_sum_with_nccl") {
  for (const ops::Optimizer& optimizer : kOptimizers) {
    for (int64_t batch : {128, 61}) {
      check_mirrored(optimizer, batch, 2, 1, AllReducePath::peer);
      check_mirrored(optimizer, batch, 4, 2, AllReducePath::hierarchical);
    }
  }
}

// Replicas on a GPU and on the CPU meet on the host (the GPU's buckets staged through pinned memory)
// and train as one GPU does.
TEST_CASE("Gpu.mirrored.a_gpu_and_a_cpu_train_as_one_gpu") {
  for (const ops::Optimizer& optimizer : kOptimizers) {
    CAPTURE(optimizer.kind);
    const TrainingProgram program = build_program("small_cnn", optimizer);
    const std::vector<Batch> batches = random_batches("small_cnn", 61, kSteps, 19);
    const auto want = train({.strategy = "one_device", .devices = {{graph::DeviceKind::gpu, 0}}}, program, batches);
    const StrategyConfig mixed{.strategy = "mirrored", .devices = {{graph::DeviceKind::gpu, 0}, {graph::DeviceKind::cpu, 0}}};
    auto strategy = make_strategy(mixed);
    REQUIRE(strategy.ok());
    CHECK((*strategy)->all_reduce_plan().path == AllReducePath::host);
    const auto got = train(mixed, program, batches);
    for (const auto& [name, value] : want) {
      if (!name.starts_with("optimizer/")) check_close(name, got.at("replica_0/" + name), value);
    }
  }
}

// State the train step writes from each replica's share (a count of examples, aggregation sum; a
// moving mean image, aggregation mean) under Mirrored over 2 logical GPUs of gpu:0 and over a GPU and
// the CPU holds what one GPU's holds (batches of 128: shares of equal size, whose means' mean is the
// batch's).
TEST_CASE("Gpu.mirrored.state_written_from_each_replica_trains_as_one_gpu") {
  TrainingProgram program = build_program("small_cnn", ops::Optimizer::momentum_sgd(0.05, 0.9));
  {
    graph::Builder b(program.graph, ops::registry());
    auto scope = b.scope("stats");
    const graph::ValueRef images = {*program.graph.find(program.signature.features), 0};
    const graph::ValueRef seen = ops::variable(b, "images_seen", {}, ops::Initializer::zeros(), graph::DType::f32, false,
                                               ops::VariableAggregation::sum);
    const graph::ValueRef mean = ops::variable(b, "mean_image", {8, 8, 1}, ops::Initializer::zeros(), graph::DType::f32,
                                               false, ops::VariableAggregation::mean);
    const graph::NodeId updates[] = {
        ops::assign_add(b, seen, ops::cast(b, ops::dim_size(b, images, 0), graph::DType::f32)),
        ops::assign(b, mean, ops::add(b, ops::mul(b, ops::scalar_of(b, 0.5, mean), mean),
                                      ops::mul(b, ops::scalar_of(b, 0.5, mean), ops::reduce_mean(b, images, {0})))),
    };
    REQUIRE(b.status().ok());
    for (graph::NodeId update : updates) program.graph.add_control_edge(update, program.signature.train);
  }
  const std::vector<Batch> batches = random_batches("small_cnn", 128, kSteps, 31);
  const auto want = train({.strategy = "one_device", .devices = {{graph::DeviceKind::gpu, 0}}}, program, batches);
  REQUIRE(want.at("stats/images_seen") == std::vector<double>{128.0 * kSteps});
  const StrategyConfig configs[] = {
      {.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::gpu, 2), .logical_gpus_per_gpu = 2},
      {.strategy = "mirrored", .devices = {{graph::DeviceKind::gpu, 0}, {graph::DeviceKind::cpu, 0}}}};
  for (const StrategyConfig& config : configs) {
    CAPTURE(config.devices.back().to_string());
    const auto got = train(config, program, batches);
    for (const auto& [name, value] : want) {
      if (!name.starts_with("optimizer/")) check_close(name, got.at("replica_0/" + name), value);
    }
  }
}

// Mirrored over `replicas` GPUs of `logical_gpus_per_gpu` per physical GPU (the small CNN, Adam,
// global batch 61), as configured and with `vary` applied to the config, which must sum along `path`:
// the variables (not the slots) each trains, by name.
struct Variants {
  std::map<std::string, std::vector<double>> plain, varied;
};
Variants train_variants(int replicas, int logical_gpus_per_gpu, uint64_t seed, AllReducePath path,
                        const std::function<void(StrategyConfig&)>& vary) {
  CAPTURE(replicas);
  CAPTURE(logical_gpus_per_gpu);
  const TrainingProgram program = build_program("small_cnn", ops::Optimizer::adam(0.001));
  const std::vector<Batch> batches = random_batches("small_cnn", 61, kSteps, seed);
  StrategyConfig config{.strategy = "mirrored",
                        .devices = devices_of(graph::DeviceKind::gpu, replicas),
                        .logical_gpus_per_gpu = logical_gpus_per_gpu};
  Variants out;
  for (auto& [name, value] : train(config, program, batches)) {
    if (!is_slot(name)) out.plain[name] = std::move(value);
  }
  vary(config);
  auto strategy = make_strategy(config);
  REQUIRE(strategy.ok());
  CHECK((*strategy)->all_reduce_plan().path == path);
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  // Sharded slots hold different shares on each replica.
  for (auto& [name, value] : train_checking_replicas(*distributed, batches, replicas,
                                                     /*check_slots=*/!config.shard_optimizer_state, logical_gpus_per_gpu)) {
    if (!is_slot(name)) out.varied[name] = std::move(value);
  }
  return out;
}

// Sharded optimizer state (ZeRO stage 1) over `replicas` GPUs of `logical_gpus_per_gpu` per physical
// GPU trains as unsharded Mirrored does.
void check_sharded(int replicas, int logical_gpus_per_gpu, AllReducePath path) {
  const Variants trained = train_variants(replicas, logical_gpus_per_gpu, 23, path,
                                          [](StrategyConfig& config) { config.shard_optimizer_state = true; });
  for (const auto& [name, value] : trained.plain) check_close(name, trained.varied.at(name), value);
}

// Logical GPUs of one GPU share its memory: their gradients are reduce-scattered on the host.
TEST_CASE("Gpu.mirrored.sharded_state_of_logical_gpus") { check_sharded(2, 2, AllReducePath::host); }

// One replica per GPU: the GPUs reduce-scatter among themselves through NCCL.
TEST_CASE("Gpu.mirrored.several_gpus_reduce_scatter_sharded_state_with_nccl") { check_sharded(2, 1, AllReducePath::peer); }

// bf16 all-reduce (all_reduce.compression) over `replicas` GPUs of `logical_gpus_per_gpu` per
// physical GPU follows uncompressed Mirrored within bf16's rounding.
void check_compressed(int replicas, int logical_gpus_per_gpu, AllReducePath path) {
  const Variants trained = train_variants(replicas, logical_gpus_per_gpu, 29, path,
                                          [](StrategyConfig& config) { config.all_reduce.compression = "bf16"; });
  check_follows_within_bf16(trained.varied, trained.plain);
}

// Logical GPUs of one GPU: their bf16 buckets are summed on the GPU, in f32, rounded once.
TEST_CASE("Gpu.mirrored.bf16_all_reduce_of_logical_gpus") { check_compressed(2, 2, AllReducePath::on_device); }

// Needs two GPUs: NCCL sums the bf16 buckets, alone and beneath two logical GPUs on each.
TEST_CASE("Gpu.mirrored.several_gpus_bf16_all_reduce_with_nccl") {
  check_compressed(2, 1, AllReducePath::peer);
  check_compressed(4, 2, AllReducePath::hierarchical);
}

TEST_CASE("Gpu.captured_steps.replay_as_steps_run_one_by_one") {
  const std::vector<Batch> batches = random_batches("small_cnn", 128, 50, 31);
  const std::vector<graph::DeviceId> two = devices_of(graph::DeviceKind::gpu, 2);
  for (const ops::Optimizer& optimizer : kOptimizers) {
    const TrainingProgram program = build_program("small_cnn", optimizer);
    for (const CaptureSetup& setup : {CaptureSetup{.devices = {{graph::DeviceKind::gpu, 0}}},
                                      CaptureSetup{.strategy = "mirrored", .devices = two, .logical_per_device = 2}}) {
      CAPTURE(optimizer.kind);
      CAPTURE(setup.strategy);
      const CapturedRun captured = check_replays_match(program, batches, setup, 1e-6);
      CHECK(captured.refusals.empty());
      CHECK(captured.replays == static_cast<int64_t>(batches.size()) - 1);
    }
  }
}

// Rank 1's input fails its check, so rank 1 never comes to the NCCL meeting: rank 0 fails with that
// error at once, not at its deadline (an hour), and the next step meets as usual.
TEST_CASE("Gpu.nccl.several_gpus_fail_a_failed_step_at_once") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  std::vector<graph::ValueRef> sums;
  for (int r = 0; r < 2; ++r) {
    b.set_device(graph::DeviceId{graph::DeviceKind::gpu, r});
    auto x = ops::placeholder(b, "x" + std::to_string(r), graph::DType::f32, {2});
    if (r == 1) x = ops::check_numerics(b, x, "rank 1's gradient");
    sums.push_back(ops::all_reduce(b, {x}, {.group = "doomed", .rank = r, .ranks = 2}, "sum", {.timeout_ms = 3'600'000})[0]);
  }
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels());
  const auto start = std::chrono::steady_clock::now();
  auto failed = session.run({{"x0", runtime::Tensor::from<float>({2}, {1, 2})}, {"x1", runtime::Tensor::from<float>({2}, {NAN, 2})}}, sums);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("rank 1's gradient") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
  auto summed = session.run({{"x0", runtime::Tensor::from<float>({2}, {1, 2})}, {"x1", runtime::Tensor::from<float>({2}, {3, 4})}}, sums);
  REQUIRE_MESSAGE(summed.ok(), summed.status().to_string());
  for (const runtime::Tensor& sum : *summed) CHECK(sum.to_vector<float>() == std::vector<float>{4, 6});
}

}  // namespace
}  // namespace mirra::strategies::test
