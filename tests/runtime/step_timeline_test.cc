// The step observer as the timeline sees it: every node that ran appears once, with its end after its
// start and its start after each producer's end, in every way a step runs (tasks on the CPU, one node
// at a time, on cpu_async devices' streams); fed nodes do not appear; an observed step is never a
// replay, and the steps after it are again.
#include <doctest/doctest.h>

#include <map>

#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::runtime {
namespace {

using graph::DType;
using graph::ValueRef;

struct Diamonds {
  graph::Graph graph;
  ValueRef out;
};

// Layers of diamonds: each value splits into a square and a negation that meet again in a sum.
Diamonds diamonds(int layers) {
  Diamonds d;
  graph::Builder b(d.graph, ops::registry());
  ValueRef v = ops::placeholder(b, "x", DType::f32, {-1});
  for (int i = 0; i < layers; ++i) v = ops::tanh(b, ops::add(b, ops::square(b, v), ops::neg(b, v)));
  d.out = ops::reduce_sum(b, v);
  MIRRA_CHECK(b.status().ok(), b.status().to_string());
  return d;
}

void check_timeline(const graph::Graph& g, const std::vector<NodeTiming>& timeline) {
  std::map<graph::NodeId, NodeTiming> by_node;
  for (const NodeTiming& t : timeline) {
    REQUIRE(t.node < g.size());
    CHECK_MESSAGE(by_node.emplace(t.node, t).second, g.node(t.node).name << " appears twice");
    CHECK(t.start_ns > 0);
    CHECK(t.end_ns >= t.start_ns);
  }
  for (const graph::Node& node : g.nodes()) {
    const auto found = by_node.find(node.id);
    if (node.op == "Placeholder") {
      CHECK_MESSAGE(found == by_node.end(), "the fed node " << node.name << " ran");
      continue;
    }
    REQUIRE_MESSAGE(found != by_node.end(), node.name << " is missing");
    for (const ValueRef input : node.inputs) {
      const auto producer = by_node.find(input.node);
      if (producer == by_node.end()) continue;  // fed
      CHECK_MESSAGE(found->second.start_ns >= producer->second.end_ns,
                    node.name << " started before " << g.node(input.node).name << " ended");
    }
  }
}

TEST_CASE("StepTimeline.records_every_node_that_ran_once_after_its_producers") {
  Diamonds d = diamonds(40);
  struct Mode {
    const char* name;
    bool deterministic;
    graph::DeviceKind kind;
  };
  for (const Mode mode : {Mode{"tasks", false, graph::DeviceKind::cpu}, Mode{"one at a time", true, graph::DeviceKind::cpu},
                          Mode{"streams", false, graph::DeviceKind::cpu_async}}) {
    CAPTURE(mode.name);
    graph::Graph g = d.graph;
    if (mode.kind == graph::DeviceKind::cpu_async) {
      for (graph::NodeId id = 0; id < g.size(); ++id) {
        if (g.node(id).op != "Placeholder") g.mutable_node(id).device = graph::DeviceId{mode.kind, static_cast<int>(id % 2)};
      }
    }
    Session session(g, ops::kernels(), {.threads = 2, .deterministic = mode.deterministic, .trace = true});
    for (int step = 0; step < 3; ++step) {
      auto out = session.run({{"x", Tensor::from<float>({3}, {0.5f, -1, 2})}}, {d.out});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      check_timeline(session.graph(), session.last_timeline());
    }
  }
}

TEST_CASE("StepTimeline.observed_steps_are_not_replays") {
  Diamonds d = diamonds(5);
  for (graph::NodeId id = 0; id < d.graph.size(); ++id) {
    if (d.graph.node(id).op != "Placeholder") d.graph.mutable_node(id).device = graph::DeviceId{graph::DeviceKind::cpu_async, 0};
  }
  Session session(d.graph, ops::kernels(), {.threads = 2, .trace = true, .capture_steps = true});
  const auto run = [&] {
    auto out = session.run({{"x", Tensor::from<float>({3}, {0.5f, -1, 2})}}, {d.out});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    return (*out)[0].to_vector<float>();
  };
  const std::vector<float> first = run();
  for (int step = 0; step < 3; ++step) {
    CHECK(run() == first);
    check_timeline(session.graph(), session.last_timeline());
  }
  CHECK(session.replayed_steps() == 0);
  session.set_trace(false);
  for (int step = 0; step < 4; ++step) CHECK(run() == first);
  CHECK(session.replayed_steps() == 3);  // the first untraced step runs, the second is recorded and replayed
}

}  // namespace
}  // namespace mirra::runtime
