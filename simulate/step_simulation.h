// One training step as events: each device's kernels run one at a time on its compute stream (or
// up to `lanes` at a time: a CPU device whose executor runs independent kernels on several
// threads), each as soon as its inputs are ready and a lane is free, the earliest in graph order
// first when several are (as the executor's dataflow runs them); the collectives run one at a time on
// one communication channel in their fixed order (the collective order every replica follows), each
// once its inputs on every device are ready and the one before it is done, beside the kernels. The
// step ends when its last node does; compute and exposed communication are device 0's.
//
//   StepGraph step = ...;  // nodes in topological order, collectives with their bytes
//   StepTimes t = simulate_step(step, [&](const StepNode& c) { return collective_seconds(...); });
//   // t.exposed_communication: the time device 0 waited for the channel
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/status.h"
#include "simulate/collective_cost.h"

namespace mirra::simulate {

struct StepNode {
  std::string name;
  std::string op;
  double seconds = 0;  // a kernel's time on its device
  int device = 0;      // a kernel's device, of the step's `devices`
  bool collective = false;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;             // a collective's buffer on each device
  std::vector<size_t> inputs;   // earlier nodes it waits for
};

struct StepGraph {
  std::vector<StepNode> nodes;  // in topological order
  int lanes = 1;                 // kernels a device runs at once (a GPU's compute stream: 1)
  int devices = 1;               // the replicas' devices the kernels run on
  int64_t measured_kernels = 0;  // kernels timed from a real run
  int64_t roofline_kernels = 0;  // kernels timed by their roofline
};

struct StepTimes {
  double step = 0;                    // seconds from the first kernel to the end of the last node
  double compute = 0;                 // the time some kernel runs on device 0 (one lane: its kernels' times, summed)
  double communication = 0;           // the collectives' times, summed
  double exposed_communication = 0;   // step - compute: device 0 waiting for collectives (or the others)
};

// internal_error naming a node whose input is not before it, or a kernel on a device the step lacks.
graph::Expected<StepTimes> simulate_step(const StepGraph& step, const std::function<double(const StepNode&)>& collective_seconds);

}  // namespace mirra::simulate
