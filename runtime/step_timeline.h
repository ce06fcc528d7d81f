// StepTimeline: the step observer that records when each node started and ended (what ran when, and
// what overlapped), read by Session::last_timeline, `mirra train --trace` and the benchmarks.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/step_observer.h"

namespace mirra::runtime {

// When one node of a step ran, in nanoseconds of a steady clock.
struct NodeTiming {
  graph::NodeId node = graph::kInvalidNode;
  int64_t start_ns = 0, end_ns = 0;
};

class StepTimeline final : public StepObserver {
 public:
  void on_step_start(size_t plan_nodes) override;
  void on_node_start(uint32_t index, const graph::Node& node) override;
  void on_node_end(uint32_t index, const graph::Node& node) override;

  // The nodes that ran, in plan order (fed nodes do not run).
  std::vector<NodeTiming> timings() &&;

 private:
  std::vector<NodeTiming> by_index_;  // one slot per plan node, written only by that node's calls
};

}  // namespace mirra::runtime
