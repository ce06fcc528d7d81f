// Kernel times measured in a real run, for `mirra simulate --costs`: read from a Chrome trace that
// `mirra train --trace` wrote (under multi_worker_mirrored, a worker's FILE.worker<r>). Per node
// name, the median of its kernel's durations over the recorded steps, the first step (which builds
// the plans and the kernels' primitives) left out when others follow; and the executor's own time
// between two kernels of a device (the median of the gaps under 20 us, the trace's threshold for a
// wait), which a measured step pays once per kernel; and how many kernels a device ran at once (its
// kernels' time over the time some kernel ran, rounded: a CPU device's executor runs independent
// kernels on several threads, each then slower than alone). The collectives' times are not taken from the
// trace (a rank's time there includes its wait for the other ranks): the cluster file models them.
// A kernel the trace did not time takes the time of its twins, the same node of the one-replica
// program on the replicas the trace did time (strategies::replica_free_name): a worker's trace so
// times the other workers' replicas, which run the same kernels on their shares.
//
//   MIRRA_ASSIGN_OR_RETURN(MeasuredCosts costs, read_measured_costs("run.trace.json"));
//   step_graph(graph, roots, dims, replica, cluster.device, &costs);
#pragma once

#include <map>
#include <string>

#include "graph/status.h"

namespace mirra::simulate {

struct MeasuredCosts {
  std::string source;                           // the trace's path
  std::map<std::string, double> kernel_seconds; // by node name
  std::map<std::string, double> twin_seconds;   // by replica-free name, over every replica's kernels
  double dispatch_seconds = 0;                  // the executor's time from one kernel of a device to the next
  int concurrency = 1;                          // kernels a device ran at once, the most of any device
  int64_t steps = 0;                            // steps whose kernels count
  double step_seconds = 0;                      // the mean of those steps in the traced run
};

// Errors name `source`: not a trace of mirra's (no "traceEvents", no "steps" track), no step whose
// kernels were recorded.
graph::Expected<MeasuredCosts> parse_measured_costs(const std::string& text, const std::string& source);
graph::Expected<MeasuredCosts> read_measured_costs(const std::string& path);

// The time of the kernel of node `name`: its own, else its twins', else none.
const double* measured_kernel_seconds(const MeasuredCosts& costs, const std::string& name);

}  // namespace mirra::simulate
