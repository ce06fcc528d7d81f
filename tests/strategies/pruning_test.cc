// Pruning: a strategy's result holds only what its steps need (the chains a fusion replaced are not
// cloned, nor are the replicas' own loss means, which the metrics recompute), and every variable.
#include <doctest/doctest.h>

#include "strategies/pruning.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

int count_ops(const graph::Graph& g, std::string_view op) {
  int n = 0;
  for (const graph::Node& node : g.nodes()) n += node.op == op;
  return n;
}

TEST_CASE("Pruning.drops_what_no_step_needs_and_keeps_every_variable") {
  TrainingProgram program = build_program("small_cnn", ops::Optimizer::sgd(0.1));
  // Fusion replaces Conv2D -> BiasAdd -> Relu by a FusedConv2D and leaves the chain unread.
  const runtime::training::TrainingGraph& s = program.signature;
  REQUIRE(ops::rewrite_for_training(program.graph, ops::registry(), ops::MixedPrecision::off, {},
                                    {s.train, s.loss.node, s.correct.node})
              .ok());
  REQUIRE(count_ops(program.graph, "FusedConv2D") == 1);
  REQUIRE(count_ops(program.graph, "Conv2D") == 1);
  {
    graph::Builder b(program.graph, ops::registry());
    (void)ops::variable(b, "unread", {3});
    REQUIRE(b.status().ok());
  }
  for (const char* strategy : {"one_device", "mirrored"}) {
    const std::string name = strategy;
    CAPTURE(name);
    auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, name == "mirrored" ? 2 : 1)});
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    const graph::Graph& g = distributed->graph;
    const int replicas = name == "mirrored" ? 2 : 1;
    CHECK(count_ops(g, "Conv2D") == 0);
    CHECK(count_ops(g, "FusedConv2D") == replicas);
    CHECK(count_ops(g, "ReduceMean") == (name == "mirrored" ? 0 : 1));  // the metrics divide the replicas' sums
    CHECK(g.contains(name == "mirrored" ? "replica_0/unread" : "unread"));
    // Every reference the program holds names a node of its graph, and it still trains.
    for (const auto& [variable, gradient] : distributed->variables_and_gradients) {
      CHECK(variable.node < g.size());
      CHECK(gradient.node < g.size());
    }
    runtime::Session session(g, ops::kernels());
    const Batch batch = random_batches("small_cnn", 6, 1, 3)[0];
    auto out = session.run(feeds(*distributed, batch), {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  }
}

}  // namespace
}  // namespace mirra::strategies::test
