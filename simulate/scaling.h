// scaling_sweep: a step's time on 1 to N devices of a cluster, per all-reduce algorithm, with the
// batch per device fixed (weak scaling, as data-parallel training scales): examples/s, and the
// scaling efficiency against one device (its step time over the step time on p devices).
#pragma once

#include <vector>

#include "simulate/cluster.h"
#include "simulate/collective_cost.h"
#include "simulate/step_simulation.h"

namespace mirra::simulate {

struct ScalingPoint {
  int devices = 1;
  Algorithm algorithm = Algorithm::ring;
  StepTimes times;
  double examples_per_second = 0;
  double efficiency = 1;
};

// 1, 2, 4, ... up to the cluster's devices (at most 4,096), and that count itself when it is not a
// power of two.
std::vector<int> device_counts(const ClusterSpec& cluster);

// Every (count, algorithm) pair, counts outermost. Errors: simulate_step's.
graph::Expected<std::vector<ScalingPoint>> scaling_sweep(const StepGraph& step, const ClusterSpec& cluster,
                                                         const std::vector<int>& counts,
                                                         const std::vector<Algorithm>& algorithms, int64_t batch_per_device);

}  // namespace mirra::simulate
