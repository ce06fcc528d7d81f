// One training step as events on one device: its kernels run one at a time on the compute stream,
// each as soon as its inputs are ready, the earliest in graph order first when several are (as the
// executor's dataflow runs them); its collectives run one at a time on one communication channel in
// their fixed order (the collective order every replica follows), each once its inputs are ready and
// the one before it is done, beside the compute stream. The step ends when its last node does.
//
//   StepGraph step = ...;  // nodes in topological order, collectives with their bytes
//   StepTimes t = simulate_step(step, [&](const StepNode& c) { return collective_seconds(...); });
//   // t.exposed_communication: the time the compute stream waited for the channel
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graph/status.h"
#include "simulate/collective_cost.h"

namespace mirra::simulate {

struct StepNode {
  std::string name;
  std::string op;
  double seconds = 0;  // a kernel's time on the device
  bool collective = false;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;             // a collective's buffer on each device
  std::vector<size_t> inputs;   // earlier nodes it waits for
};

struct StepGraph {
  std::vector<StepNode> nodes;  // in topological order
};

struct StepTimes {
  double step = 0;                    // seconds from the first kernel to the end of the last node
  double compute = 0;                 // the kernels' times, summed
  double communication = 0;           // the collectives' times, summed
  double exposed_communication = 0;   // step - compute: the compute stream waiting for collectives
};

// internal_error naming a node whose input is not before it.
graph::Expected<StepTimes> simulate_step(const StepGraph& step, const std::function<double(const StepNode&)>& collective_seconds);

}  // namespace mirra::simulate
