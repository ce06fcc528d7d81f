// Sharded optimizer state (ZeRO stage 1, strategies/sharded_updates.h): Mirrored over 2, 3 and 4
// replicas with shard_optimizer_state trains like unsharded Mirrored and like one device (momentum and
// Adam, the MLP in f64 and a small CNN in f32, global batches 128, 61 and 2, so shares are uneven and
// some replicas get no examples), within 1e-5 relative; the replicas' variables stay bitwise equal
// after every step; each replica's slots hold exactly its share of the unsharded slots, and their
// bytes per replica drop to about 1/N. Gradient accumulation, clipping by the global norm (the norm
// of every replica's shares) and asynchronous devices combine with it; what it cannot shard (loss
// scaling, central storage) is refused. Across workers each replica of each worker holds its part of
// every share.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "runtime/collectives/communicator.h"
#include "strategies/replicate.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int kSteps = 8;

TrainingProgram mirrored(const TrainingProgram& program, graph::DeviceKind kind, int replicas, bool sharded,
                         int logical_per_device = 1) {
  auto strategy = make_strategy({.strategy = "mirrored",
                                 .devices = devices_of(kind, replicas),
                                 .logical_gpus_per_gpu = logical_per_device,
                                 .shard_optimizer_state = sharded});
  REQUIRE(strategy.ok());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  return std::move(*distributed);
}

// Over `replicas` devices of `kind`, `logical_per_device` of them sharing each device's memory.
void check_sharded(const std::string& model, const ops::Optimizer& optimizer, int64_t batch_size, int replicas,
                   graph::DeviceKind kind = graph::DeviceKind::cpu, int logical_per_device = 1) {
  const TrainingProgram program = build_program(model, optimizer);
  const std::vector<Batch> batches = random_batches(model, batch_size, kSteps, 29);
  const auto one_device = train_checking_replicas(program, batches, 1, true);
  const auto unsharded = train_checking_replicas(mirrored(program, kind, replicas, false, logical_per_device), batches,
                                                 replicas, true, logical_per_device);
  const TrainingProgram sharded_program = mirrored(program, kind, replicas, true, logical_per_device);
  const auto sharded =
      train_checking_replicas(sharded_program, batches, replicas, /*check_slots=*/false, logical_per_device);

  int64_t slot_bytes = 0;
  std::vector<int64_t> replica_slot_bytes(static_cast<size_t>(replicas), 0);
  int slots = 0;
  for (const auto& [name, want] : unsharded) {
    if (!name.starts_with("replica_0/")) continue;
    const std::string free_name = name.substr(std::string("replica_0/").size());
    if (!is_slot(free_name)) {
      check_close(free_name, sharded.at(name), one_device.at(free_name));
      check_close(free_name, sharded.at(name), want);
      continue;
    }
    // The replicas' shares, in replica order, are the unsharded slot's elements.
    std::vector<double> joined;
    for (int r = 0; r < replicas; ++r) {
      const std::vector<double>& share = sharded.at("replica_" + std::to_string(r) + "/" + free_name);
      CHECK(static_cast<int64_t>(share.size()) ==
            runtime::participant_share(static_cast<int64_t>(want.size()), replicas, r));
      joined.insert(joined.end(), share.begin(), share.end());
      replica_slot_bytes[static_cast<size_t>(r)] += static_cast<int64_t>(share.size());
    }
    check_close(free_name, joined, want);
    slot_bytes += static_cast<int64_t>(want.size());
    ++slots;
  }
  REQUIRE(slots > 0);
  for (int64_t bytes : replica_slot_bytes) CHECK(bytes <= slot_bytes / replicas + slots);
  CHECK(std::accumulate(replica_slot_bytes.begin(), replica_slot_bytes.end(), int64_t{0}) == slot_bytes);

  // Reduce-scatters of buckets of variables, each gradient in one (a rank per replica, on the host or
  // on devices of one replica each, counted by rank 0's), and no all-reduce of gradients (with
  // clipping, one of the replicas' sums of squares); each replica writes each variable once, from
  // every replica's share (on the host, the shares themselves; among devices, what the bucket's
  // AllGather joined of them).
  const int variables = static_cast<int>(program.variables_and_gradients.size());
  int reduce_scatters = 0, scattered = 0, all_gathers = 0, gathered = 0, all_reduces = 0, writes = 0;
  const auto& nodes = sharded_program.graph.nodes();
  const bool peer = std::any_of(nodes.begin(), nodes.end(), [](const graph::Node& n) { return n.op == "AllGather"; });
  for (const graph::Node& node : nodes) {
    const bool rank_0 = node.attrs.get<int64_t>("rank") && *node.attrs.get<int64_t>("rank") == 0;
    if (node.op == "ReduceScatter" && rank_0) {
      ++reduce_scatters;
      scattered += static_cast<int>(node.inputs.size());
    }
    if (node.op == "AllGather" && rank_0) {
      ++all_gathers;
      gathered += static_cast<int>(node.inputs.size());
    }
    if (node.op == "AllReduce" && rank_0) {
      ++all_reduces;
      for (graph::ValueRef input : node.inputs) CHECK(sharded_program.graph.type(input).shape == graph::Shape{});
    }
    if (node.op == "Assign") {
      ++writes;
      CHECK(node.inputs.size() == (peer ? 2 : static_cast<size_t>(replicas) + 1));
    }
  }
  CHECK(scattered == variables);
  CHECK(reduce_scatters < variables);  // the models' small variables share buckets
  CHECK(all_gathers == (peer ? reduce_scatters : 0));
  CHECK(gathered == (peer ? variables : 0));
  CHECK(writes == variables * replicas);
  CHECK(all_reduces == (optimizer.clip_global_norm > 0 ? 1 : 0));
}

TEST_CASE("ShardedOptimizerState.equals_unsharded_and_one_device") {
  const std::vector<ops::Optimizer> optimizers = {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.001)};
  for (const std::string model : {"mlp", "small_cnn"}) {
    for (const ops::Optimizer& optimizer : optimizers) {
      for (int64_t batch : {128, 61, 2}) {
        for (int replicas : {2, 3, 4}) {
          CAPTURE(model);
          CAPTURE(optimizer.kind);
          CAPTURE(batch);
          CAPTURE(replicas);
          check_sharded(model, optimizer, batch, replicas);
        }
      }
    }
  }
  // Decoupled weight decay scales each share as it scales the whole variable.
  ops::Optimizer sgdw = ops::Optimizer::momentum_sgd(0.05, 0.9);
  sgdw.weight_decay = 0.5;
  sgdw.exclude_from_weight_decay = {"bias"};
  check_sharded("small_cnn", sgdw, 61, 3);
}

// Clipping by the global norm: each replica's shares scaled by the norm of the whole gradient, which
// the replicas' sums of squares add up to; a clip small enough to act on every step (0.05) and one
// that never does.
TEST_CASE("ShardedOptimizerState.clips_by_the_global_norm_as_unsharded") {
  for (const double clip : {0.05, 1e6}) {
    ops::Optimizer clipped = ops::Optimizer::adam(0.001);
    clipped.clip_global_norm = clip;
    ops::Optimizer momentum = ops::Optimizer::momentum_sgd(0.05, 0.9);
    momentum.clip_global_norm = clip;
    for (int replicas : {2, 3}) {
      CAPTURE(clip);
      CAPTURE(replicas);
      check_sharded("small_cnn", clipped, 61, replicas);
      check_sharded("mlp", momentum, 2, replicas);
    }
  }
  ops::Optimizer clipped = ops::Optimizer::adam(0.001);
  clipped.clip_global_norm = 0.05;
  check_sharded("small_cnn", clipped, 61, 4, graph::DeviceKind::cpu_async);
}

// Devices of one replica each (cpu_async, the GPU's model) reduce-scatter among themselves and gather
// the updated shares among themselves; replicas that share a device's memory reduce-scatter on the
// host, with copies to and from each device around it.
TEST_CASE("ShardedOptimizerState.on_cpu_async_devices") {
  for (const auto& expected : {std::pair{1, AllReducePath::peer}, std::pair{2, AllReducePath::host}}) {
    const int logical = expected.first;
    const AllReducePath path = expected.second;
    CAPTURE(logical);
    auto strategy = make_strategy({.strategy = "mirrored",
                                   .devices = devices_of(graph::DeviceKind::cpu_async, 4),
                                   .logical_gpus_per_gpu = logical,
                                   .shard_optimizer_state = true});
    REQUIRE(strategy.ok());
    CHECK((*strategy)->all_reduce_plan().path == path);
    check_sharded("small_cnn", ops::Optimizer::adam(0.001), 61, 4, graph::DeviceKind::cpu_async, logical);
  }
  check_sharded("mlp", ops::Optimizer::momentum_sgd(0.05, 0.9), 2, 3, graph::DeviceKind::cpu_async);
}

TEST_CASE("ShardedOptimizerState.with_gradient_accumulation") {
  TrainingProgram program = build_program("small_cnn", ops::Optimizer::adam(0.001));
  program.accumulate_gradients = true;
  const std::vector<Batch> batches = random_batches("small_cnn", 40, 6, 31);
  std::map<std::string, std::vector<double>> results[2];
  for (bool sharded : {false, true}) {
    const TrainingProgram distributed = mirrored(program, graph::DeviceKind::cpu, 3, sharded);
    runtime::Session session(distributed.graph, ops::kernels(), {.threads = 2});
    for (size_t step = 0; step < batches.size(); ++step) {
      const graph::NodeId target = step % 3 == 2 ? distributed.signature.train : distributed.signature.accumulate;
      REQUIRE(session.run(feeds(distributed, batches[step]), {}, {target}).ok());
    }
    results[sharded] = float_variables(session);
  }
  for (const auto& [name, want] : results[0]) {
    if (name.starts_with("replica_") && !is_slot(name)) check_close(name, results[1].at(name), want);
  }
}

// Across W workers every worker's graph holds its parts of the shares (runtime::worker_share): the
// W x R replicas' slots tile each unsharded slot, and one AllGather per replica and bucket gathers
// that replica's shares of the bucket's variables across the workers.
TEST_CASE("ShardedOptimizerState.across_workers.each_replica_of_each_worker_holds_its_part") {
  const int workers = 3;
  const TrainingProgram program = build_program("mlp", ops::Optimizer::adam(0.001));
  for (const int replicas : {1, 2}) {
    CAPTURE(replicas);
    auto strategy = make_strategy({.strategy = "multi_worker_mirrored",
                                   .devices = devices_of(graph::DeviceKind::cpu, replicas),
                                   .shard_optimizer_state = true});
    REQUIRE(strategy.ok());
    std::map<std::string, int64_t> held;  // slot (replica-free) -> elements over every replica of every worker
    std::map<std::string, int64_t> whole;
    for (int w = 0; w < workers; ++w) {
      CAPTURE(w);
      auto distributed = (*strategy)->distribute(program, {.worker = w, .workers = workers});
      REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
      int gathers = 0, gathered = 0, reduce_scatters = 0;
      for (const graph::Node& node : distributed->graph.nodes()) {
        if (node.op == "ReduceScatter" && *node.attrs.get<int64_t>("rank") == 0) {
          ++reduce_scatters;
          CHECK(*node.attrs.get<int64_t>("workers") == workers);
          CHECK(*node.attrs.get<int64_t>("worker") == w);
        }
        if (node.op == "AllGather") {  // one replica's parts of a bucket's shares
          ++gathers;
          gathered += static_cast<int>(node.inputs.size());
          CHECK(*node.attrs.get<int64_t>("workers") == workers);
          CHECK(*node.attrs.get<int64_t>("ranks") == 1);
        }
        const graph::Shape* shard_of = node.attrs.get<graph::Shape>("shard_of");
        if (node.op != "Variable" || shard_of == nullptr) continue;
        int replica = -1;
        const std::string name(replica_free_name(node.name, &replica));
        const int64_t count = *shard_of->num_elements();
        whole[name] = count;
        CHECK(node.outputs[0].shape == graph::Shape{runtime::worker_share(count, replicas, replica, workers, w).count});
        held[name] += node.outputs[0].shape.dim(0);
      }
      CHECK(gathers == reduce_scatters * replicas);
      CHECK(gathered == static_cast<int>(program.variables_and_gradients.size()) * replicas);
    }
    REQUIRE_FALSE(held.empty());
    CHECK(held == whole);
  }

  auto mirrored = make_strategy({.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::cpu, 2)});
  REQUIRE(mirrored.ok());
  const auto refused = (*mirrored)->distribute(program, {.worker = 1, .workers = 2});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "mirrored runs in one process, not as worker 1 of 2");
}

TEST_CASE("ShardedOptimizerState.refuses_what_it_cannot_shard") {
  SUBCASE("loss scaling") {
    const TrainingProgram program =
        build_program("small_cnn", ops::Optimizer::adam(0.001), {.loss_scaling = ops::LossScaling{}});
    auto distributed = replicate(program, {.devices = devices_of(graph::DeviceKind::cpu, 2),
                                           .host = {graph::DeviceKind::cpu, 0},
                                           .shard_optimizer_state = true});
    REQUIRE_FALSE(distributed.ok());
    CHECK(distributed.status().message().find("besides its update") != std::string::npos);
  }
  SUBCASE("central storage") {
    auto distributed = replicate(build_program("small_cnn", ops::Optimizer::adam(0.001)),
                                 {.devices = devices_of(graph::DeviceKind::cpu, 2),
                                  .host = {graph::DeviceKind::cpu, 0},
                                  .mirror_state = false,
                                  .shard_optimizer_state = true});
    REQUIRE_FALSE(distributed.ok());
    CHECK(distributed.status().message().find("needs mirrored state") != std::string::npos);
  }
}

}  // namespace
}  // namespace mirra::strategies::test
