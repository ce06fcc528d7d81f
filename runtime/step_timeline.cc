// StepTimeline: a slot per plan node, stamped from the steady clock.
#include "runtime/step_timeline.h"

#include <algorithm>
#include <chrono>

namespace mirra::runtime {

namespace {

int64_t steady_now_ns() {
  return std::chrono::steady_clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
}

}  // namespace

void StepTimeline::on_step_start(size_t plan_nodes) { by_index_.assign(plan_nodes, {}); }

void StepTimeline::on_node_start(uint32_t index, const graph::Node& node) {
  by_index_[index].node = node.id;
  by_index_[index].start_ns = steady_now_ns();
}

void StepTimeline::on_node_end(uint32_t index, const graph::Node&) { by_index_[index].end_ns = steady_now_ns(); }

std::vector<NodeTiming> StepTimeline::timings() && {
  std::erase_if(by_index_, [](const NodeTiming& t) { return t.node == graph::kInvalidNode; });
  return std::move(by_index_);
}

}  // namespace mirra::runtime
