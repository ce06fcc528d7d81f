// Where one training step's time went on each device, from the executor's timeline of the step: time
// computing, in collectives, copying between memory spaces, and waiting (the rest of the step), the
// exposed communication (collective time while the device computes nothing) and the executor's own
// time between kernels (gaps of under 20 us between a device's kernels; longer ones are waits).
// The profile (step_profile.h) averages them over steps; the TensorBoard log writes them every step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/step_timeline.h"

namespace mirra::runner {

struct DeviceStepTime {
  double compute_ns = 0, collective_ns = 0, copies_ns = 0, waiting_ns = 0, exposed_ns = 0, executor_gaps_ns = 0;

  DeviceStepTime& operator+=(const DeviceStepTime& other);
};

// By device ("cpu:0"), for a step of `step_ns` nanoseconds whose kernels ran as `timeline` says.
std::map<std::string, DeviceStepTime> device_step_times(const graph::Graph& graph,
                                                        const std::vector<runtime::NodeTiming>& timeline, double step_ns);

}  // namespace mirra::runner
