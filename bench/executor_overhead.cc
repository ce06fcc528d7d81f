// run_executor_overhead: builds each shape twice (a mirra graph of Identity nodes, a oneTBB flow graph
// of continue_nodes), runs each `repetitions` times inside a task arena of `threads`, reports the best.
#include "bench/executor_overhead.h"

#include <atomic>
#include <chrono>
#include <memory>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>

#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double mirra_ns_per_node(const ExecutorOverheadOptions& options, int width) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto start = ops::scalar(b, 1.0f);
  std::vector<graph::ValueRef> nodes;
  nodes.reserve(static_cast<size_t>(options.nodes));
  for (int i = 0; i < options.nodes; ++i) {
    nodes.push_back(ops::identity(b, i < width ? start : nodes[static_cast<size_t>(i - width)]));
  }
  MIRRA_CHECK(b.status().ok(), b.status().to_string());
  std::vector<graph::NodeId> ends;
  for (size_t i = nodes.size() - static_cast<size_t>(std::min(width, options.nodes)); i < nodes.size(); ++i) {
    ends.push_back(nodes[i].node);
  }
  runtime::Session session(g, ops::kernels(), {.threads = options.threads});
  MIRRA_CHECK(session.run({}, std::span<const graph::ValueRef>(), ends).ok());  // builds and caches the plan
  double best = 1e30;
  for (int r = 0; r < options.repetitions; ++r) {
    const auto t0 = Clock::now();
    const auto result = session.run({}, std::span<const graph::ValueRef>(), ends);
    best = std::min(best, seconds_since(t0));
    MIRRA_CHECK(result.ok(), result.status().to_string());
  }
  return best / options.nodes * 1e9;
}

double tbb_flow_ns_per_node(const ExecutorOverheadOptions& options, int width) {
  namespace flow = oneapi::tbb::flow;
  std::atomic<long> sink{0};
  oneapi::tbb::task_arena arena(options.threads);
  double best = 1e30;
  arena.execute([&] {
    flow::graph g;
    flow::broadcast_node<flow::continue_msg> start(g);
    std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
    nodes.reserve(static_cast<size_t>(options.nodes));
    for (int i = 0; i < options.nodes; ++i) {
      nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
          g, [&sink](const flow::continue_msg&) { sink.fetch_add(1, std::memory_order_relaxed); }));
      if (i < width) {
        flow::make_edge(start, *nodes.back());
      } else {
        flow::make_edge(*nodes[static_cast<size_t>(i - width)], *nodes.back());
      }
    }
    for (int r = 0; r < options.repetitions + 1; ++r) {  // the first run warms up
      const auto t0 = Clock::now();
      start.try_put(flow::continue_msg());
      g.wait_for_all();
      if (r > 0) best = std::min(best, seconds_since(t0));
    }
  });
  return best / options.nodes * 1e9;
}

}  // namespace

nlohmann::json run_executor_overhead(const ExecutorOverheadOptions& options) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& [name, width] : {std::pair{"chain", 1}, std::pair{"width64", 64}, std::pair{"width1024", 1024}}) {
    const double tbb = tbb_flow_ns_per_node(options, width);
    const double mirra = mirra_ns_per_node(options, width);
    shapes.push_back({{"shape", name},
                      {"width", width},
                      {"mirra_ns_per_node", mirra},
                      {"tbb_flow_ns_per_node", tbb},
                      {"ratio_mirra_over_tbb", mirra / tbb}});
  }
  return {{"benchmark", "executor_overhead"},
          {"nodes", options.nodes},
          {"threads", options.threads},
          {"repetitions", options.repetitions},
          {"shapes", shapes}};
}

}  // namespace mirra::bench
