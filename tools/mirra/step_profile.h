// StepProfile (`mirra train --profile`): where a training step's time goes, from the executor's
// timeline of each step (the timing --trace records): kernel time by op, each device's time computing,
// communicating (collectives), copying between memory spaces and waiting (for inputs from another
// device, a collective, or a thread), the exposed communication (collective time while the device
// computes nothing), the executor's own time per node (the gaps of under 20 us between a device's
// kernels) and the five nodes that take longest. Means per step; the run's first step, which builds
// the plans and the kernels' primitives, is left out when there are others.
//
//   StepProfile profile(session.graph());
//   trainer.on_step = [&](const StepMetrics& step) { profile.add_step(step, session.last_timeline()); };
//   std::printf("%s", profile.table().c_str());
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/step_timeline.h"
#include "runtime/training/trainer.h"
#include "tools/mirra/step_times.h"

namespace mirra::runner {

class StepProfile {
 public:
  // `first_step`: what the first step added is, which the means leave out when others follow.
  explicit StepProfile(const graph::Graph& graph, std::string first_step = "the first step, which builds the plans")
      : graph_(graph), first_step_(std::move(first_step)) {}

  void add_step(const runtime::training::StepMetrics& step, const std::vector<runtime::NodeTiming>& timeline);

  // {"steps", "first_step_left_out", "step_ms", "data_wait_ms", "by_op": [{"op", "ms", "share", "nodes"}], "by_device":
  // [{"device", "compute_ms", "collective_ms", "copies_ms", "waiting_ms", "exposed_communication_ms"}],
  // "executor_us_per_node", "slowest_nodes": [{"node", "op", "device", "ms"}]}: milliseconds per step.
  nlohmann::json json() const;
  // The same as tables for a terminal.
  std::string table() const;

 private:
  struct Step {
    runtime::training::StepMetrics metrics;
    std::vector<runtime::NodeTiming> timeline;
  };

  void count(const Step& step);
  // This profile, with the first step counted when it is the only one.
  StepProfile with_lone_first() const;

  const graph::Graph& graph_;
  std::string first_step_;
  std::optional<Step> first_;  // held until a second step comes, then dropped
  int64_t steps_ = 0;
  double step_ns_ = 0, data_wait_ns_ = 0;
  int64_t kernels_run_ = 0;
  std::map<std::string, double> by_op_ns_;
  std::map<std::string, DeviceStepTime> by_device_;
  std::map<graph::NodeId, double> by_node_ns_;
};

}  // namespace mirra::runner
