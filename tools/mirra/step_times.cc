// device_step_times: each device's kernel intervals by role, merged where they overlap, and measured.
#include "tools/mirra/step_times.h"

#include <algorithm>

#include "tools/mirra/node_roles.h"

namespace mirra::runner {

namespace {

using Interval = std::pair<int64_t, int64_t>;

// Shorter gaps between a device's kernels are the executor's own time, longer ones a wait.
constexpr int64_t kShortestWaitNs = 20'000;

// The intervals merged where they overlap or touch, in order.
std::vector<Interval> merged(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

double length(const std::vector<Interval>& disjoint) {
  double ns = 0;
  for (const auto& [start, end] : disjoint) ns += static_cast<double>(end - start);
  return ns;
}

std::vector<Interval> joined(std::vector<Interval> a, const std::vector<Interval>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return merged(std::move(a));
}

}  // namespace

DeviceStepTime& DeviceStepTime::operator+=(const DeviceStepTime& other) {
  compute_ns += other.compute_ns;
  collective_ns += other.collective_ns;
  copies_ns += other.copies_ns;
  waiting_ns += other.waiting_ns;
  exposed_ns += other.exposed_ns;
  executor_gaps_ns += other.executor_gaps_ns;
  return *this;
}

std::map<std::string, DeviceStepTime> device_step_times(const graph::Graph& graph,
                                                        const std::vector<runtime::NodeTiming>& timeline, double step_ns) {
  struct Roles {
    std::vector<Interval> compute, collective, copies;
  };
  std::map<std::string, Roles> devices;
  for (const runtime::NodeTiming& timing : timeline) {
    if (timing.node >= graph.size() || timing.end_ns == 0) continue;
    const graph::Node& node = graph.node(timing.node);
    const Interval interval{timing.start_ns, std::max(timing.start_ns, timing.end_ns)};
    Roles& roles = devices[device_of(node)];
    switch (role_of(node)) {
      case NodeRole::compute: roles.compute.push_back(interval); break;
      case NodeRole::collective: roles.collective.push_back(interval); break;
      case NodeRole::copy: roles.copies.push_back(interval); break;
    }
  }
  std::map<std::string, DeviceStepTime> times;
  for (auto& [device, roles] : devices) {
    const std::vector<Interval> compute = merged(roles.compute);
    const std::vector<Interval> collective = merged(roles.collective);
    const std::vector<Interval> copies = merged(roles.copies);
    DeviceStepTime& time = times[device];
    time.compute_ns = length(compute);
    time.collective_ns = length(collective);
    time.copies_ns = length(copies);
    time.exposed_ns = length(joined(compute, collective)) - length(compute);
    time.waiting_ns = std::max(0.0, step_ns - length(joined(joined(compute, collective), copies)));
    for (size_t i = 1; i < compute.size(); ++i) {
      const int64_t gap = compute[i].first - compute[i - 1].second;
      if (gap < kShortestWaitNs) time.executor_gaps_ns += static_cast<double>(gap);
    }
  }
  return times;
}

}  // namespace mirra::runner
