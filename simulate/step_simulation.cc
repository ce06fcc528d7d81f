// simulate_step: a list schedule of the kernels on one stream beside the collectives on one channel.
#include "simulate/step_simulation.h"

#include <algorithm>
#include <limits>
#include <queue>

namespace mirra::simulate {

graph::Expected<StepTimes> simulate_step(const StepGraph& step, const std::function<double(const StepNode&)>& collective_seconds) {
  const size_t n = step.nodes.size();
  constexpr double kUnknown = -1;
  std::vector<double> finish(n, kUnknown);
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
    waiting[i] = node.inputs.size();
    if (node.collective) collectives.push_back(i);
  }
  // ready_at[i]: when its last input finished (0 for none).
  std::vector<double> ready_at(n, 0);
  // Kernels whose inputs have finished, earliest in graph order first.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0 && !step.nodes[i].collective) ready.push(i);
  }
  StepTimes times;
  const auto finished = [&](size_t i, double at) {
    finish[i] = at;
    times.step = std::max(times.step, at);
    for (size_t reader : readers[i]) {
      ready_at[reader] = std::max(ready_at[reader], at);
      if (--waiting[reader] == 0 && !step.nodes[reader].collective) ready.push(reader);
    }
  };
  double stream = 0, channel = 0;
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
    if (ready.empty()) {
      if (done == n) break;
      return graph::internal_error("simulate: the step cannot go on: a collective waits for a kernel that waits for a "
                                   "later collective");
    }
    // The stream runs the first kernel in graph order that is ready when it is free; if none is, the
    // one ready first.
    std::vector<size_t> later;
    size_t pick = n;
    double earliest = std::numeric_limits<double>::infinity();
    size_t earliest_node = n;
    while (!ready.empty()) {
      const size_t i = ready.top();
      ready.pop();
      if (ready_at[i] <= stream) {
        pick = i;
        break;
      }
      if (ready_at[i] < earliest) {
        earliest = ready_at[i];
        earliest_node = i;
      }
      later.push_back(i);
    }
    if (pick == n) {
      pick = earliest_node;
      std::erase(later, pick);
    }
    for (size_t i : later) ready.push(i);
    const StepNode& kernel = step.nodes[pick];
    const double start = std::max(stream, ready_at[pick]);
    stream = start + kernel.seconds;
    times.compute += kernel.seconds;
    finished(pick, stream);
    ++done;
  }
  times.exposed_communication = std::max(0.0, times.step - times.compute);
  return times;
}

}  // namespace mirra::simulate
