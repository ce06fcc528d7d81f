// Session: runs a graph step by step. Feeds go in by node name (placeholders), fetches come out as
// host tensors, variables keep their values across steps. At construction the session makes the
// devices its graph names and prepares the graph (runtime/placement.h: placement, copies between
// memory spaces); plans are built once per (feeds, fetches, targets) and cached. A failed step
// leaves the session usable.
//
// The session numbers the executions of each collective group (a bucket's all-reduce): a step runs
// the next execution of every group its plan meets in. Processes whose sessions run the plans that
// hold a group equally often agree on its instances, whatever else each runs (another plan, a read
// of a variable, an evaluation on one worker only).
//
//   runtime::Session session(graph, ops::kernels());
//   auto out = session.run({{"x", Tensor::from<float>({2, 2}, {1, 2, 3, 4})}}, {y});
//   if (!out.ok()) std::cerr << out.status().to_string();
//
// A training loop stages the next batch before it runs the current one (stage, then run_staged), so
// a GPU copies the next batch in while it computes this step.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "graph/graph.h"
#include "runtime/collectives/communicator.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/kernel.h"
#include "runtime/step_timeline.h"
#include "runtime/variable_store.h"

namespace mirra::runtime {

struct SessionOptions {
  int threads = 0;             // oneTBB threads for this session; 0: all cores
  bool deterministic = false;  // one node at a time, in plan order, on one thread; GPUs: deterministic algorithms
  graph::DeviceId default_device = {};  // for nodes with no device
  bool soft_placement = false;  // a node its device has no kernel for runs on cpu:0 instead of failing
  bool allow_tf32 = false;      // GPUs may run f32 products and convolutions in TF32 (GpuOptions)
  int logical_gpus_per_gpu = 1;  // gpu:<i> (and cpu_async:<i>) is a logical device on physical i / k (GpuOptions)
  bool trace = false;          // record every step's node timeline (see last_timeline)
  // Record a request's step once and replay it (on GPUs as a CUDA graph): Note [Captured steps] in
  // runtime/executor.h. A step that cannot be replayed runs as usual, and the reason is printed once.
  bool capture_steps = false;
  int64_t memory_limit = 0;    // bytes the session's devices may hold together; 0: no limit but the system's
  // Subnormal floats read and written as zero by the CPU threads that run its steps (FTZ/DAZ, as in
  // TensorFlow; runtime/denormals.h): arithmetic on them is tens of times slower.
  bool flush_denormals = true;
  // The collective implementations its kernels may use, the first for "auto"; none given: one
  // InProcessCommunicator for the session's own devices.
  std::vector<std::shared_ptr<Communicator>> communicators;
  // The task this process is (a worker's rank): its devices may be named with it (/task:<task>/gpu:0)
  // or without; a node placed on another task's device is refused (ops::partition_by_task cuts a graph
  // into one per task, whose values cross as Send and Recv).
  int task = 0;
};

using Feeds = std::map<std::string, Tensor, std::less<>>;

// Feeds checked and on their way to the devices that read them (Session::stage), for one later run
// of the session that staged them.
class StagedFeeds {
 private:
  friend class Session;
  const void* session_ = nullptr;
  std::vector<graph::NodeId> nodes_;
  std::vector<Tensor> values_;
  // Streams that must wait for a feed's copy before the step's work: those of every device that
  // shares the feed's memory.
  std::vector<std::pair<Stream*, std::shared_ptr<Event>>> waits_;
};

class Session {
 public:
  // Copies `graph`; `kernels` must outlive the session.
  Session(const graph::Graph& graph, const KernelRegistry& kernels, SessionOptions options = {});
  ~Session();

  // One step: feeds by node name, then the fetched values in order, in host memory. Errors name the
  // placeholder (an unknown name, a wrong dtype or shape) or the node whose kernel failed, or say why
  // the graph cannot run on the session's devices.
  graph::Expected<std::vector<Tensor>> run(const Feeds& feeds, std::span<const graph::ValueRef> fetches,
                                           std::span<const graph::NodeId> targets = {});
  graph::Expected<std::vector<Tensor>> run(const Feeds& feeds, std::initializer_list<graph::ValueRef> fetches,
                                           std::initializer_list<graph::NodeId> targets = {}) {
    return run(feeds, std::span<const graph::ValueRef>(fetches.begin(), fetches.size()),
               std::span<const graph::NodeId>(targets.begin(), targets.size()));
  }

  // Checks the feeds as run does and starts their copies into device memory now (a GPU's run on its
  // copy stream), so that staging the next batch before running this one overlaps its copy with
  // this step. A failed device copy is an error naming the feed.
  graph::Expected<StagedFeeds> stage(const Feeds& feeds) const;
  // One step with staged feeds (used up); otherwise as run.
  graph::Expected<std::vector<Tensor>> run_staged(StagedFeeds feeds, std::span<const graph::ValueRef> fetches,
                                                  std::span<const graph::NodeId> targets = {});

  // With SessionOptions::trace: when each node that ran in the last finished step started and ended.
  std::vector<NodeTiming> last_timeline() const;
  // Turns the recording of timelines on or off for the following steps (SessionOptions::trace).
  void set_trace(bool trace) { trace_.store(trace); }

  // The graph as prepared: placed, with copies between memory spaces.
  const graph::Graph& graph() const { return graph_; }
  VariableStore& variables() { return variables_; }
  // A copy of a variable's value in host memory (later steps leave it as it is), or nothing when it
  // does not exist yet. A failed device copy throws DeviceError.
  std::optional<Tensor> read_variable(const std::string& name) const;
  // Sets a variable from a host tensor, into the memory of the device of the Variable node of that
  // name (host memory when there is none): into its buffer when it has one of that dtype and shape
  // (steps that recorded the buffer read the new value), else into a new one; never into `value`'s,
  // which later steps would write. A failed device copy throws DeviceError.
  void assign_variable(const std::string& name, const Tensor& value);
  // With SessionOptions::capture_steps: how many steps were replays, and why the requests whose steps
  // are not replayed are not.
  int64_t replayed_steps();
  std::vector<std::string> capture_refusals();
  const DeviceSet& devices() const { return devices_; }

 private:
  graph::Expected<Executor*> executor_for(const std::vector<graph::NodeId>& fed,
                                          std::span<const graph::ValueRef> fetches,
                                          std::span<const graph::NodeId> targets);

  Tensor to_host(const Tensor& tensor) const;
  // The next execution of each of `groups` (their sequence numbers), each then counted as run.
  std::vector<int64_t> next_instances(const std::vector<std::string>& groups);

  graph::Graph graph_;
  const KernelRegistry& kernels_;
  SessionOptions options_;
  std::atomic<bool> trace_;
  DeviceSet devices_;
  graph::Status prepared_;  // why the graph cannot run on devices_, if it cannot
  VariableStore variables_;
  CommunicatorSet communicators_;
  SessionResources resources_;
  std::mutex sequences_mutex_;
  std::map<std::string, int64_t> group_sequences_;  // the next execution of each collective group
  std::unique_ptr<oneapi::tbb::task_arena> arena_;
  std::mutex executors_mutex_;
  std::map<std::string, std::unique_ptr<Executor>> executors_;  // by request key
  mutable std::mutex timeline_mutex_;
  std::vector<NodeTiming> last_timeline_;
};

}  // namespace mirra::runtime
