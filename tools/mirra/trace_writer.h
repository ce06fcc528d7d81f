// A Chrome trace (Trace Event Format JSON; opens in Perfetto and chrome://tracing) of training: per
// device, a track of the kernels it computed with the waits between them (category "wait", gaps of
// 20 us or more within a step), a track of its collectives ("device gpu:0 communication": the
// all-reduce buckets, category "collective"; on a GPU, its communication stream) and one of its
// copies between memory spaces ("device gpu:0 copies"), so the overlap of the backward pass with the
// all-reduce shows; an input-pipeline track with the wait for each batch, a track of whole steps, and
// in a multi-worker run a track of the cross-worker all-reduces, each split into its local reduce,
// the wait for the slowest other worker and the transfer across workers; its metadata ("otherData")
// says where the gradients are summed (strategies/all_reduce_plan.h). Records the first `max_steps`
// steps so that a long run leaves a file of bounded size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/collectives/worker_communicator.h"
#include "runtime/executor.h"
#include "runtime/training/trainer.h"

namespace mirra::runner {

class TraceWriter {
 public:
  // `all_reduce`: the strategy's all-reduce plan, described.
  TraceWriter(const graph::Graph& graph, std::string all_reduce, int64_t max_steps = 200);

  // The step's metrics and the session's timeline of that step.
  void add_step(const runtime::training::StepMetrics& step, const std::vector<runtime::NodeTiming>& timeline);
  // The phases of the cross-worker all-reduces of the steps added so far.
  void add_collective_phases(const std::vector<runtime::CollectivePhases>& phases);
  // True once max_steps steps are recorded: later steps need no timeline.
  bool full() const { return steps_ >= max_steps_; }
  graph::Status write(const std::string& path) const;

 private:
  int track(const std::string& name);
  void add_event(const std::string& name, const std::string& category, int track, int64_t start_ns, int64_t end_ns,
                 const std::string& args_json = "");

  const graph::Graph& graph_;
  std::string all_reduce_;
  int64_t max_steps_;
  int64_t steps_ = 0;
  int64_t origin_ns_ = -1;
  std::map<std::string, int> tracks_;
  std::string events_;
};

}  // namespace mirra::runner
