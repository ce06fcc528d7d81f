// scaling_sweep: simulate_step at each device count, its collectives costed by each algorithm.
#include "simulate/scaling.h"

#include <algorithm>

namespace mirra::simulate {

std::vector<int> device_counts(const ClusterSpec& cluster) {
  const int most = std::min(cluster.devices(), 4096);
  std::vector<int> counts;
  for (int p = 1; p <= most; p *= 2) counts.push_back(p);
  if (counts.back() != most) counts.push_back(most);
  return counts;
}

graph::Expected<std::vector<ScalingPoint>> scaling_sweep(const StepGraph& step, const ClusterSpec& cluster,
                                                         const std::vector<int>& counts,
                                                         const std::vector<Algorithm>& algorithms, int64_t batch_per_device) {
  MIRRA_ASSIGN_OR_RETURN(const StepTimes alone, simulate_step(step, [](const StepNode&) { return 0.0; }));
  std::vector<ScalingPoint> points;
  for (const int p : counts) {
    for (const Algorithm algorithm : algorithms) {
      MIRRA_ASSIGN_OR_RETURN(const StepTimes times, simulate_step(step, [&](const StepNode& c) {
                               return collective_seconds(c.kind, algorithm, c.bytes, p, cluster);
                             }));
      points.push_back({.devices = p,
                        .algorithm = algorithm,
                        .times = times,
                        .examples_per_second = times.step > 0 ? static_cast<double>(p * batch_per_device) / times.step : 0,
                        .efficiency = times.step > 0 ? alone.step / times.step : 1});
    }
  }
  return points;
}

}  // namespace mirra::simulate
