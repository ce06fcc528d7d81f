// TraceWriter: complete ("X") events in microseconds, tracks as named threads of one process.
#include "tools/mirra/trace_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "tools/mirra/node_roles.h"

namespace mirra::runner {

TraceWriter::TraceWriter(const graph::Graph& graph, std::string all_reduce, int64_t max_steps)
    : graph_(graph), all_reduce_(std::move(all_reduce)), max_steps_(max_steps) {}

int TraceWriter::track(const std::string& name) {
  const auto [it, added] = tracks_.emplace(name, static_cast<int>(tracks_.size()) + 1);
  if (added) {
    const int id = it->second;
    events_ += (events_.empty() ? "" : ",\n") + nlohmann::json({{"ph", "M"}, {"pid", 1}, {"tid", id},
                                                                {"name", "thread_name"},
                                                                {"args", {{"name", name}}}})
                                                     .dump();
    events_ += ",\n" + nlohmann::json({{"ph", "M"}, {"pid", 1}, {"tid", id}, {"name", "thread_sort_index"},
                                       {"args", {{"sort_index", id}}}})
                           .dump();
  }
  return it->second;
}

void TraceWriter::add_event(const std::string& name, const std::string& category, int track_id, int64_t start_ns,
                            int64_t end_ns, const std::string& args_json) {
  nlohmann::json event = {{"ph", "X"},
                          {"pid", 1},
                          {"tid", track_id},
                          {"name", name},
                          {"cat", category},
                          {"ts", static_cast<double>(start_ns - origin_ns_) / 1e3},
                          {"dur", static_cast<double>(std::max<int64_t>(end_ns - start_ns, 0)) / 1e3}};
  if (!args_json.empty()) event["args"] = nlohmann::json::parse(args_json);
  events_ += (events_.empty() ? "" : ",\n") + event.dump();
}

void TraceWriter::add_step(const runtime::training::StepMetrics& step, const std::vector<runtime::NodeTiming>& timeline) {
  if (full()) return;
  ++steps_;
  if (origin_ns_ < 0) origin_ns_ = step.data_start_ns;
  const int steps_track = track("steps");
  const int input_track = track("input pipeline");
  add_event("wait for batch", "data", input_track, step.data_start_ns, step.step_start_ns);
  add_event("step " + std::to_string(step.step), "step", steps_track, step.step_start_ns, step.step_end_ns,
            nlohmann::json({{"epoch", step.epoch}, {"batch", step.batch}, {"examples", step.examples}, {"loss", step.loss}})
                .dump());
  // Per device: each kernel on the track of its stream (compute, communication for collectives,
  // copies between memory spaces), then the gaps between the compute kernels within the step as
  // waits (for inputs from another device, an all-reduce, or a thread).
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> busy;
  for (const runtime::NodeTiming& timing : timeline) {
    if (timing.node >= graph_.size() || timing.end_ns == 0) continue;
    const graph::Node& node = graph_.node(timing.node);
    const std::string device = "device " + device_of(node);
    const NodeRole role = role_of(node);
    const bool collective = role == NodeRole::collective;
    const bool copy = role == NodeRole::copy;
    const std::string stream = collective ? device + " communication" : copy ? device + " copies" : device;
    add_event(node.name, collective ? "collective" : "kernel", track(stream), timing.start_ns, timing.end_ns,
              nlohmann::json({{"op", node.op}}).dump());
    if (!collective && !copy) busy[device].emplace_back(timing.start_ns, timing.end_ns);
  }
  constexpr int64_t kShortestWaitNs = 20'000;  // shorter gaps are the executor's own overhead
  for (auto& [device, intervals] : busy) {
    std::sort(intervals.begin(), intervals.end());
    int64_t covered = step.step_start_ns;
    for (const auto& [start, end] : intervals) {
      if (start - covered >= kShortestWaitNs) add_event("wait", "wait", track(device), covered, start);
      covered = std::max(covered, end);
    }
  }
}

void TraceWriter::add_collective_phases(const std::vector<runtime::CollectivePhases>& phases) {
  const int workers = track("across workers (MPI)");
  for (const runtime::CollectivePhases& p : phases) {
    add_event("local reduce " + p.group, "collective", workers, p.start_ns, p.local_done_ns);
    add_event("waiting for workers " + p.group, "wait", workers, p.local_done_ns, p.peers_arrived_ns);
    add_event("all-reduce across workers " + p.group, "collective", workers, p.peers_arrived_ns, p.done_ns);
  }
}

graph::Status TraceWriter::write(const std::string& path) const {
  std::ofstream file(path);
  if (!file) return graph::invalid_argument("cannot write trace file '" + path + "'");
  file << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << nlohmann::json({{"all_reduce", all_reduce_}}).dump()
       << ",\"traceEvents\":[\n" << events_ << "\n]}\n";
  if (!file) return graph::invalid_argument("cannot write trace file '" + path + "'");
  return graph::Status();
}

}  // namespace mirra::runner
