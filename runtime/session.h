// Session: runs a graph step by step. Feeds go in by node name (placeholders), fetches come out as
// tensors, variables keep their values across steps. Plans are built once per (feeds, fetches,
// targets) and cached. A failed step leaves the session usable.
//
//   runtime::Session session(graph, ops::cpu_kernels());
//   auto out = session.run({{"x", Tensor::from<float>({2, 2}, {1, 2, 3, 4})}}, {y});
//   if (!out.ok()) std::cerr << out.status().to_string();
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "graph/graph.h"
#include "runtime/collectives/collective.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/kernel.h"
#include "runtime/variable_store.h"

namespace mirra::runtime {

struct SessionOptions {
  int threads = 0;             // oneTBB threads for this session; 0: all cores
  bool deterministic = false;  // one node at a time, in plan order, on one thread
  graph::DeviceId default_device = {};  // for nodes with no device
  bool trace = false;          // record every step's node timeline (see last_timeline)
  int64_t memory_limit = 0;    // bytes the session's devices may hold together; 0: no limit but the system's
  // The collective implementations its kernels may use, the first for "auto"; none given: one
  // InProcessCollective for the session's own devices.
  std::vector<std::shared_ptr<Collective>> collectives;
};

using Feeds = std::map<std::string, Tensor, std::less<>>;

class Session {
 public:
  // Copies `graph`; `kernels` must outlive the session.
  Session(const graph::Graph& graph, const KernelRegistry& kernels, SessionOptions options = {});
  ~Session();

  // One step: feeds by node name, then the fetched values in order. Errors name the placeholder (an
  // unknown name, a wrong dtype or shape) or the node whose kernel failed.
  graph::Expected<std::vector<Tensor>> run(const Feeds& feeds, std::span<const graph::ValueRef> fetches,
                                           std::span<const graph::NodeId> targets = {});
  graph::Expected<std::vector<Tensor>> run(const Feeds& feeds, std::initializer_list<graph::ValueRef> fetches,
                                           std::initializer_list<graph::NodeId> targets = {}) {
    return run(feeds, std::span<const graph::ValueRef>(fetches.begin(), fetches.size()),
               std::span<const graph::NodeId>(targets.begin(), targets.size()));
  }

  // With SessionOptions::trace: when each node that ran in the last finished step started and ended.
  std::vector<NodeTiming> last_timeline() const;
  // Turns the recording of timelines on or off for the following steps (SessionOptions::trace).
  void set_trace(bool trace) { trace_.store(trace); }

  const graph::Graph& graph() const { return graph_; }
  VariableStore& variables() { return variables_; }
  const DeviceSet& devices() const { return devices_; }

 private:
  graph::Expected<Executor*> executor_for(const std::vector<graph::NodeId>& fed,
                                          std::span<const graph::ValueRef> fetches,
                                          std::span<const graph::NodeId> targets);

  graph::Graph graph_;
  const KernelRegistry& kernels_;
  SessionOptions options_;
  std::atomic<bool> trace_;
  DeviceSet devices_;
  VariableStore variables_;
  CollectiveSet collectives_;
  SessionResources resources_;
  std::atomic<int64_t> steps_{0};
  std::unique_ptr<oneapi::tbb::task_arena> arena_;
  std::mutex executors_mutex_;
  std::map<std::string, std::unique_ptr<Executor>> executors_;  // by request key
  mutable std::mutex timeline_mutex_;
  std::vector<NodeTiming> last_timeline_;
};

}  // namespace mirra::runtime
