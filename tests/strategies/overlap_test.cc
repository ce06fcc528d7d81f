// Communication overlaps the backward pass: under Mirrored, the all-reduce of the first bucket (the
// last layers' gradients) starts before the last gradient node of the step has finished, as the
// executor's own timeline shows; on cpu_async devices (the GPU's model, whose ranks meet as NCCL's
// do) every rank's all-reduce of the first bucket has even ended by then.
#include <doctest/doctest.h>

#include <set>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

// Every replica's clone of each of the program's gradient nodes.
std::set<graph::NodeId> gradient_nodes_of(const TrainingProgram& program, const graph::Graph& g, int replicas) {
  std::set<graph::NodeId> nodes;
  for (const auto& [variable, gradient] : program.variables_and_gradients) {
    for (int r = 0; r < replicas; ++r) {
      const auto clone = g.find("replica_" + std::to_string(r) + "/" + program.graph.node(gradient.node).name);
      REQUIRE(clone.has_value());
      nodes.insert(*clone);
    }
  }
  return nodes;
}

TEST_CASE("Mirrored.first_bucket_all_reduce_overlaps_the_backward_pass") {
  const TrainingProgram program = build_program("mlp", ops::Optimizer::sgd(0.01));
  StrategyConfig config{.strategy = "mirrored", .devices = {{graph::DeviceKind::cpu, 0}, {graph::DeviceKind::cpu, 1}}};
  config.all_reduce.first_bucket_mb = 0.1;  // the logits and fc2 gradients; fc1's (784 x 256) go in bucket 1
  auto strategy = make_strategy(config);
  REQUIRE(strategy.ok());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE(distributed.ok());
  const graph::Graph& g = distributed->graph;
  // The first bucket's ranks, one per replica; its sum runs once the last has started.
  std::set<graph::NodeId> first_bucket;
  for (const graph::Node& node : g.nodes()) {
    const std::string* group = node.attrs.get<std::string>("group");
    if (node.op == "AllReduce" && group != nullptr && *group == "all_reduce/bucket_0") first_bucket.insert(node.id);
  }
  REQUIRE(first_bucket.size() == 2);
  REQUIRE(g.find("all_reduce/bucket_1/rank_0/AllReduce").has_value());
  const std::set<graph::NodeId> gradient_nodes = gradient_nodes_of(program, g, 2);
  REQUIRE(gradient_nodes.size() == 2 * 6);

  runtime::Session session(g, ops::kernels(), {.threads = 2, .trace = true});
  const auto batches = random_batches("mlp", 512, 10, 3);
  int overlapped = 0;
  for (const Batch& batch : batches) {
    REQUIRE(session.run(feeds(*distributed, batch), {}, {distributed->signature.train}).ok());
    int64_t bucket_start = -1, last_gradient_end = 0;
    for (const runtime::NodeTiming& t : session.last_timeline()) {
      if (first_bucket.contains(t.node)) bucket_start = std::max(bucket_start, t.start_ns);
      if (gradient_nodes.count(t.node) > 0) last_gradient_end = std::max(last_gradient_end, t.end_ns);
    }
    REQUIRE(bucket_start >= 0);
    overlapped += bucket_start < last_gradient_end;
  }
  MESSAGE("the first bucket's all-reduce started before the backward pass ended in " << overlapped << " of 10 steps");
  CHECK(overlapped > 0);
}

TEST_CASE("Mirrored.on_cpu_async_devices_the_first_bucket_is_summed_while_the_backward_pass_goes_on") {
  const TrainingProgram program = build_program("mlp", ops::Optimizer::sgd(0.01));
  StrategyConfig config{.strategy = "mirrored",
                        .devices = {{graph::DeviceKind::cpu_async, 0}, {graph::DeviceKind::cpu_async, 1}}};
  config.all_reduce.first_bucket_mb = 0.1;
  auto strategy = make_strategy(config);
  REQUIRE(strategy.ok());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE(distributed.ok());
  const graph::Graph& g = distributed->graph;
  std::set<graph::NodeId> first_bucket;  // its rank on each device
  for (const graph::Node& node : g.nodes()) {
    const std::string* group = node.attrs.get<std::string>("group");
    if (node.op == "AllReduce" && group != nullptr && *group == "all_reduce/bucket_0") first_bucket.insert(node.id);
  }
  REQUIRE(first_bucket.size() == 2);
  const std::set<graph::NodeId> gradient_nodes = gradient_nodes_of(program, g, 2);

  runtime::Session session(g, ops::kernels(), {.threads = 2, .trace = true});
  const auto batches = random_batches("mlp", 512, 10, 3);
  int overlapped = 0;
  for (const Batch& batch : batches) {
    REQUIRE(session.run(feeds(*distributed, batch), {}, {distributed->signature.train}).ok());
    int64_t bucket_end = 0, last_gradient_end = 0;
    for (const runtime::NodeTiming& t : session.last_timeline()) {
      if (first_bucket.count(t.node) > 0) bucket_end = std::max(bucket_end, t.end_ns);
      if (gradient_nodes.count(t.node) > 0) last_gradient_end = std::max(last_gradient_end, t.end_ns);
    }
    REQUIRE(bucket_end > 0);
    overlapped += bucket_end < last_gradient_end;
  }
  MESSAGE("the first bucket's all-reduce ended before the backward pass did in " << overlapped << " of 10 steps");
  CHECK(overlapped > 0);
}

}  // namespace
}  // namespace mirra::strategies::test
