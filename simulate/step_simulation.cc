// simulate_step: a list schedule of the kernels on their devices' lanes beside the collectives on one channel.
#include "simulate/step_simulation.h"

#include <algorithm>
#include <limits>
#include <set>

namespace mirra::simulate {

graph::Expected<StepTimes> simulate_step(const StepGraph& step, const std::function<double(const StepNode&)>& collective_seconds) {
  const size_t n = step.nodes.size();
  const size_t devices = static_cast<size_t>(std::max(step.devices, 1));
  std::vector<size_t> waiting(n, 0);           // inputs not finished yet
  std::vector<std::vector<size_t>> readers(n);
  std::vector<size_t> collectives;             // in their fixed order
  for (size_t i = 0; i < n; ++i) {
    const StepNode& node = step.nodes[i];
    for (size_t input : node.inputs) {
      if (input >= i) {
        return graph::internal_error("simulate: '" + node.name + "' waits for a node that is not before it");
      }
      readers[input].push_back(i);
    }
    if (!node.collective && (node.device < 0 || static_cast<size_t>(node.device) >= devices)) {
      return graph::internal_error("simulate: '" + node.name + "' runs on a device the step does not have");
    }
    waiting[i] = node.inputs.size();
    if (node.collective) collectives.push_back(i);
  }
  // ready_at[i]: when its last input finished (0 for none).
  std::vector<double> ready_at(n, 0);
  // Per device, the kernels whose inputs have finished, in graph order.
  std::vector<std::set<size_t>> ready(devices);
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0 && !step.nodes[i].collective) ready[static_cast<size_t>(step.nodes[i].device)].insert(i);
  }
  StepTimes times;
  const auto finished = [&](size_t i, double at) {
    times.step = std::max(times.step, at);
    for (size_t reader : readers[i]) {
      ready_at[reader] = std::max(ready_at[reader], at);
      if (--waiting[reader] == 0 && !step.nodes[reader].collective) {
        ready[static_cast<size_t>(step.nodes[reader].device)].insert(reader);
      }
    }
  };
  // When each lane of each device is free; device 0's kernels' intervals, whose union is its compute time.
  std::vector<std::vector<double>> lanes(devices, std::vector<double>(static_cast<size_t>(std::max(step.lanes, 1)), 0.0));
  std::vector<std::pair<double, double>> busy;
  double channel = 0;
  size_t next_collective = 0, done = 0;
  while (done < n) {
    // The channel takes the next collective in order once its inputs finished.
    while (next_collective < collectives.size() && waiting[collectives[next_collective]] == 0) {
      const size_t c = collectives[next_collective++];
      const double seconds = collective_seconds(step.nodes[c]);
      const double start = std::max(channel, ready_at[c]);
      channel = start + seconds;
      times.communication += seconds;
      finished(c, channel);
      ++done;
    }
    if (done == n) break;
    // On each device, its first free lane runs the first kernel in graph order that is ready by then,
    // or else the one ready first; of those, the kernel that starts first runs next.
    size_t pick = n, pick_device = 0;
    double pick_start = std::numeric_limits<double>::infinity();
    for (size_t d = 0; d < devices; ++d) {
      if (ready[d].empty()) continue;
      const double free = *std::min_element(lanes[d].begin(), lanes[d].end());
      size_t candidate = n;
      double earliest = std::numeric_limits<double>::infinity();
      for (const size_t i : ready[d]) {
        if (ready_at[i] <= free) {
          candidate = i;
          break;
        }
        if (ready_at[i] < earliest) {
          earliest = ready_at[i];
          candidate = i;
        }
      }
      const double start = std::max(free, ready_at[candidate]);
      if (start < pick_start || (start == pick_start && candidate < pick)) {
        pick = candidate;
        pick_device = d;
        pick_start = start;
      }
    }
    if (pick == n) {
      return graph::internal_error("simulate: the step cannot go on: a collective waits for a kernel that waits for a "
                                   "later collective");
    }
    ready[pick_device].erase(pick);
    double& lane = *std::min_element(lanes[pick_device].begin(), lanes[pick_device].end());
    lane = pick_start + step.nodes[pick].seconds;
    if (pick_device == 0) busy.emplace_back(pick_start, lane);
    finished(pick, lane);
    ++done;
  }
  std::sort(busy.begin(), busy.end());
  double covered = 0;
  for (const auto& [start, end] : busy) {
    times.compute += std::max(0.0, end - std::max(start, covered));
    covered = std::max(covered, end);
  }
  times.exposed_communication = std::max(0.0, times.step - times.compute);
  return times;
}

}  // namespace mirra::simulate
