// Executor: runs an ExecutionPlan as a dataflow graph on oneTBB. Each step resets atomic pending
// counts; a node runs when its last producer finishes. Cheap nodes run inline on the thread that made
// them ready, expensive ones become tasks; no kernel ever waits for another node. An asynchronous
// kernel finishes when it calls its done callback: its continuation is a deferred task of the step
// (so the step waits for it), submitted to the arena by the callback, and no worker thread blocks
// meanwhile. A kernel on a device with streams of its own runs on its compute stream (or, a
// collective that asks, its communication stream); it is done for its consumers on streams
// when it is enqueued (they follow it on its stream, or wait for its event on theirs), and for the
// others (and for releasing its inputs) when the device has run it (a GPU kernel's launch returns
// before). The first error wins: the step stops scheduling, and the error names the node, its op
// and its device. Values are released as soon as their last consumer has run. In deterministic mode
// nodes run one at a time in plan order on the calling thread, but a collective may wait for peers
// later in the plan (Note [Deterministic steps with peers]). A step may be given an observer, told
// when each kernel starts and ends (a StepTimeline records what ran when). With capture on, steps
// are recorded once and replayed (Note [Captured steps]).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <oneapi/tbb/task_group.h>

#include "runtime/execution_plan.h"
#include "runtime/step_observer.h"

namespace mirra::runtime {

// Note [Captured steps]
// A training step repeats the same work on the same shapes, so it can be recorded once and replayed:
// on GPUs a CUDA graph, one launch instead of a launch per kernel and the executor's host work;
// on cpu_async devices, their model, the streams' recorded work enqueued again. With capture on, the
// first step runs as usual (libraries set themselves up, caches fill), the second is recorded while
// the executor runs it without waiting for the devices, then replayed; later steps whose feeds have
// the captured shapes are replays. The feeds of a replay are copied into the captured feeds'
// buffers first; its fetches are copied out of the captured ones. The recording keeps every value
// of the step (the replays write the same buffers) and each device's allocators hold the blocks
// freed while it recorded until the executor ends. A variable assigned in place (Session::
// assign_variable) is read by the replays; one replaced by a new buffer ends the capture.
// Host nodes may take part: those that depend on none of the devices' work (splitting the batch,
// reading a host variable) run before each replay, and their values are copied into buffers the
// recording reads; those that feed none of it (metrics, a step counter's increment) run after it.
// A step that a replay could not repeat is not captured, and says why (capture_refusal): a host node
// between work of the devices, a kernel on a device that reads an input on the host when launched
// (its replays would keep the recorded value; CopyFromHost copies at replay) or completes on the
// host, streams that cannot record together, deterministic mode; a failed recording says what
// failed. While a step is recorded nothing may wait for it on the host (Stream::synchronize refuses)
// or give device memory back (an allocation past the memory fails the recording instead, and the
// step runs as usual). A step whose feeds differ in shape from the captured ones runs as usual, and
// so does an observed step.
class Executor {
 public:
  // `resources` must outlive the executor.
  Executor(ExecutionPlan plan, const SessionResources& resources, bool deterministic, bool capture = false);
  ~Executor();

  // One step. `instances` says which execution of each of the plan's collective groups
  // (collective_groups()) it is; `feeds` are in the order of PlanRequest::fed; returns the fetches
  // in request order. Call it from inside the session's task arena. An `observer` is told of every
  // node the step runs.
  graph::Expected<std::vector<Tensor>> run(std::vector<Tensor> feeds, std::vector<int64_t> instances,
                                           StepObserver* observer = nullptr);
  // The groups its collectives meet in, each once.
  const std::vector<std::string>& collective_groups() const { return plan_.collective_groups; }

  // With capture on: why its steps are not replayed (empty while they are, or may yet be).
  std::string capture_refusal() const;
  // How many of its steps were replays.
  int64_t replays() const;
  // Drops the recorded step (a variable it reads got a new buffer); a later step records again.
  void forget_capture();

 private:
  struct StepState;
  struct AsyncNode;
  struct CapturedStep;
  graph::Expected<std::vector<Tensor>> run_uncaptured(std::vector<Tensor> feeds, std::vector<int64_t> instances,
                                                      StepObserver* observer);
  struct CapturePlan;
  CapturePlan plan_capture() const;
  void record_ready_node(StepState& step, uint32_t index, std::vector<uint32_t>& ready,
                         oneapi::tbb::task_group& tasks) const;
  Status record_host_node(StepState& step, uint32_t index) const;
  bool replayable_with(const std::vector<Tensor>& feeds) const;
  graph::Expected<std::vector<Tensor>> capture(std::vector<Tensor> feeds, std::vector<int64_t> instances);
  // `prologue_ran`: the host nodes before the devices' work ran for these feeds already (the recording).
  graph::Expected<std::vector<Tensor>> replay(std::vector<Tensor> feeds, bool prologue_ran = false);
  void record_node(StepState& step, uint32_t index, AsyncNode& call, KernelDone done) const;
  void record_device_collective(StepState& step, uint32_t index, AsyncNode& call, KernelDone done) const;
  std::unique_ptr<StepState> acquire_state();
  void release_state(std::unique_ptr<StepState> state);

  std::vector<bool> reusable_inputs(const StepState& step, const PlanNode& pn) const;
  KernelContext context_for(StepState& step, const PlanNode& pn, const std::vector<bool>& reusable) const;
  Status run_node(StepState& step, uint32_t index) const;
  void start_async_node(StepState& step, uint32_t index, std::vector<uint32_t>& ready,
                        oneapi::tbb::task_group& tasks) const;
  void enqueue_on_stream(StepState& step, uint32_t index, AsyncNode& call, KernelDone done) const;
  Status run_async_node_to_completion(StepState& step, uint32_t index) const;
  Status check_outputs(const PlanNode& pn, const Tensor* outputs) const;
  bool output_matches(const OutputSpec& spec, const Tensor& produced) const;
  static std::string describe(const PlanNode& pn);
  void release_inputs(StepState& step, const PlanNode& pn) const;
  void make_ready(StepState& step, std::span<const uint32_t> consumers, std::vector<uint32_t>& ready_cheap,
                  oneapi::tbb::task_group& tasks) const;
  void process(StepState& step, std::vector<uint32_t> ready, oneapi::tbb::task_group& tasks) const;
  void run_parallel(StepState& step) const;
  void run_sequential(StepState& step) const;
  // An asynchronous kernel's done callback, on whatever thread finished the kernel (a stream's, a
  // communicator's): hands the node's continuation to the step's arena (Note [Continuations from
  // other threads]).
  void continue_in_arena(StepState& step, AsyncNode& call) const;

  ExecutionPlan plan_;
  const SessionResources& resources_;
  bool deterministic_;
  std::mutex states_mutex_;
  std::vector<std::unique_ptr<StepState>> free_states_;  // reused so steps do not allocate them
  bool capture_;
  mutable std::mutex capture_mutex_;
  int64_t uncaptured_steps_ = 0;
  std::string capture_refusal_;
  std::unique_ptr<CapturedStep> captured_;
  int64_t replays_ = 0;
  mutable std::atomic<int> continuing_{0};  // done callbacks inside continue_in_arena
};

}  // namespace mirra::runtime
