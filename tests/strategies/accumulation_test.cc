// Gradient accumulation (Note [Gradient accumulation] in strategies/replica_graph.cc): k micro-batches,
// k - 1 through the accumulate target and the last through the train target, give the variables one
// train step gives on the k micro-batches joined, for one device, Mirrored and CentralStorage over
// 1-3 replicas, micro-batches of equal and of unequal sizes, momentum and Adam, the MLP (f64) and a
// small CNN (f32), within 1e-5 relative. The accumulate target updates nothing but the accumulators
// and runs no collective (across workers: scalars only), and every accumulator is zero after an update.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int kUpdates = 3;

bool is_accumulator(const std::string& name) {
  int replica = -1;
  return replica_free_name(name, &replica).starts_with("accumulate/");
}

// The trained variables (not the accumulators), by replica-free name, replica 0's copy.
std::map<std::string, std::vector<double>> trained_variables(runtime::Session& session) {
  std::map<std::string, std::vector<double>> trained;
  for (auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string free_name(replica_free_name(name, &replica));
    if (!is_accumulator(name) && replica <= 0) trained[free_name] = std::move(value);
  }
  return trained;
}

// Every node `target` needs (through inputs or control inputs), itself included.
std::set<graph::NodeId> ancestors(const graph::Graph& g, graph::NodeId target) {
  std::vector<graph::NodeId> stack = {target};
  std::set<graph::NodeId> seen;
  while (!stack.empty()) {
    const graph::NodeId id = stack.back();
    stack.pop_back();
    if (!seen.insert(id).second) continue;
    const graph::Node& node = g.node(id);
    for (graph::ValueRef input : node.inputs) stack.push_back(input.node);
    for (graph::NodeId control : node.control_inputs) stack.push_back(control);
  }
  return seen;
}

bool needs_all_reduce(const graph::Graph& g, graph::NodeId target) {
  for (graph::NodeId id : ancestors(g, target)) {
    if (g.node(id).op == "AllReduce") return true;
  }
  return false;
}

void check_accumulation(const std::string& model, const ops::Optimizer& optimizer, const std::vector<int64_t>& sizes) {
  TrainingProgram program = build_program(model, optimizer);
  // kUpdates updates of sizes.size() micro-batches each.
  std::vector<std::vector<Batch>> micro(kUpdates);
  for (size_t m = 0; m < sizes.size(); ++m) {
    const std::vector<Batch> batches = random_batches(model, sizes[m], kUpdates, 31 + m);
    for (int u = 0; u < kUpdates; ++u) micro[static_cast<size_t>(u)].push_back(batches[static_cast<size_t>(u)]);
  }
  runtime::Session reference(program.graph, ops::kernels(), {.threads = 2});
  for (const std::vector<Batch>& update : micro) {
    REQUIRE(reference.run(feeds(program, join(update)), {}, {program.signature.train}).ok());
  }
  const auto want = trained_variables(reference);

  program.accumulate_gradients = true;
  struct Run {
    std::string strategy;
    int replicas;
  };
  for (const Run& run : {Run{"one_device", 1}, Run{"mirrored", 1}, Run{"mirrored", 2}, Run{"mirrored", 3},
                         Run{"central_storage", 2}}) {
    CAPTURE(run.strategy);
    CAPTURE(run.replicas);
    std::vector<graph::DeviceId> devices;
    for (int i = 0; i < run.replicas; ++i) devices.push_back({graph::DeviceKind::cpu, i});
    auto strategy = make_strategy({.strategy = run.strategy, .devices = devices});
    REQUIRE(strategy.ok());
    auto distributed = (*strategy)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    const TrainingProgram& p = *distributed;
    REQUIRE(p.signature.accumulate != graph::kInvalidNode);
    CHECK_FALSE(needs_all_reduce(p.graph, p.signature.accumulate));
    CHECK(needs_all_reduce(p.graph, p.signature.train) == (run.strategy != "central_storage"));

    runtime::Session session(p.graph, ops::kernels(), {.threads = 2});
    for (int u = 0; u < kUpdates; ++u) {
      const std::vector<Batch>& update = micro[static_cast<size_t>(u)];
      const auto before = trained_variables(session);  // none before the first run creates them
      for (size_t m = 0; m + 1 < update.size(); ++m) {
        auto out = session.run(feeds(p, update[m]), {p.signature.loss}, {p.signature.accumulate});
        REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      }
      if (u > 0 && update.size() > 1) CHECK(trained_variables(session) == before);  // nothing applied yet
      auto out = session.run(feeds(p, update.back()), {p.signature.loss}, {p.signature.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      for (const auto& [name, value] : float_variables(session)) {
        if (!is_accumulator(name)) continue;
        for (double x : value) {
          if (x != 0) FAIL("accumulator " << name << " holds " << x << " after update " << u);
        }
      }
    }
    const auto got = trained_variables(session);
    for (const auto& [name, value] : want) {
      if (name.starts_with("optimizer/")) continue;
      REQUIRE(got.count(name) == 1);
      check_close(name, got.at(name), value);
    }
  }
}

TEST_CASE("Accumulation.k_micro_batches_equal_one_step_on_them_joined") {
  for (const std::string model : {"mlp", "small_cnn"}) {
    for (const ops::Optimizer& optimizer : {ops::Optimizer::momentum_sgd(0.05, 0.9), ops::Optimizer::adam(0.001)}) {
      for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{32, 32, 32, 32}, std::vector<int64_t>{40, 40, 37},
                                                std::vector<int64_t>{61}, std::vector<int64_t>{5, 1}}) {
        CAPTURE(model);
        CAPTURE(optimizer.kind);
        CAPTURE(sizes.size());
        CAPTURE(sizes.front());
        check_accumulation(model, optimizer, sizes);
      }
    }
  }
}

// Across workers the accumulate target all-reduces only scalars (the global batch size); the gradient
// buckets belong to the train target.
TEST_CASE("Accumulation.across_workers_gradients_cross_only_when_applied") {
  TrainingProgram program = build_program("small_cnn", ops::Optimizer::sgd(0.1));
  program.accumulate_gradients = true;
  auto strategy = make_strategy({.strategy = "multi_worker_mirrored", .devices = {{graph::DeviceKind::cpu, 0}}});
  REQUIRE(strategy.ok());
  auto distributed = (*strategy)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  const graph::Graph& g = distributed->graph;
  const auto largest_all_reduced = [&](graph::NodeId target) {
    int64_t largest = -1;
    for (graph::NodeId id : ancestors(g, target)) {
      if (g.node(id).op != "AllReduce") continue;
      for (graph::ValueRef input : g.node(id).inputs) largest = std::max(largest, g.type(input).shape.num_elements().value_or(-1));
    }
    return largest;
  };
  CHECK(largest_all_reduced(distributed->signature.accumulate) == 1);
  CHECK(largest_all_reduced(distributed->signature.train) > 1);
}

}  // namespace
}  // namespace mirra::strategies::test
