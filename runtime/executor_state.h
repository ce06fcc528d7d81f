// The executor's state of one step, and the calls of kernels, shared by the executor's files
// (executor.cc: steps as they run; executor_capture.cc: steps recorded and replayed). Internal.
#pragma once

#include <atomic>
#include <new>
#include <optional>

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "runtime/executor.h"

namespace mirra::runtime {

namespace executor_detail {

// Allocation is the one failure kernels do not return as a Status (allocate_output has no room for
// one); it ends the step like any other error. OutOfMemory says what was asked and why.
inline Status out_of_memory(const std::bad_alloc& e) {
  return graph::resource_exhausted(std::string("out of memory: ") + e.what());
}

// A kernel that touched memory it may not (a bug in the kernel or a missing copy).
inline Status memory_space_violation(const MemorySpaceError& e) { return graph::internal_error(e.what()); }

// Calls a synchronous kernel; the failures a kernel throws instead of returning become its Status.
inline Status call_kernel(KernelFn fn, KernelContext& context) {
  try {
    return fn(context);
  } catch (const std::bad_alloc& e) {
    return out_of_memory(e);
  } catch (const MemorySpaceError& e) {
    return memory_space_violation(e);
  } catch (const DeviceError& e) {
    return e.status();
  }
}

// Calls the kernel and reports to `done`, also the failures a kernel throws instead of returning.
inline void invoke_kernel(const KernelDef& kernel, KernelContext& context, const KernelDone& done) {
  if (kernel.async_fn == nullptr) return done(call_kernel(kernel.fn, context));
  try {
    kernel.async_fn(context, done);
  } catch (const std::bad_alloc& e) {
    done(out_of_memory(e));
  } catch (const MemorySpaceError& e) {
    done(memory_space_violation(e));
  } catch (const DeviceError& e) {
    done(e.status());
  }
}

// The stream a node's kernel runs on, on a device with streams of its own: the device's compute
// stream, or its communication stream (KernelDef::on_communication_stream).
inline Stream& stream_of(const PlanNode& pn) {
  return pn.on_communication_stream ? pn.device->communication_stream() : pn.device->compute_stream();
}

// What the node's kernel allocates for (ScopedAllocationStream): its device's communication stream
// when it runs there, else the compute stream (null).
inline const void* allocation_stream_of(const PlanNode& pn) {
  return pn.on_communication_stream ? &pn.device->communication_stream() : nullptr;
}

// Reports a kernel's work on `stream` done once the device ran it (a GPU kernel only launched it),
// with the device's error if it reported one.
inline void report_when_device_done(Stream& stream, Status status, const KernelDone& done) {
  if (!status.ok()) return done(std::move(status));
  stream.when_device_done(done);
}

// Runs the node's kernel. On a device with streams of its own a synchronous kernel runs on its
// stream (with access to the device's memory, and the host's when the kernel declares host-memory
// arguments), reported done once the device ran it; an asynchronous kernel, whose inputs the device
// has finished by then, runs here and reports done itself once the device ran its work, on whichever
// stream it launched it (AsyncKernelFn): so it waits for nothing else the compute stream holds (a
// bucket's all-reduce starts while the backward pass goes on). Elsewhere it runs here.
inline void launch(const PlanNode& pn, KernelContext& context, KernelDone done) {
  if (!pn.device->asynchronous()) return invoke_kernel(*pn.kernel, context, done);
  const MemorySpace space = pn.device->memory_space();
  if (pn.kernel->async_fn != nullptr) {
    ScopedMemoryAccess access(space, pn.kernel->uses_host_memory());
    return invoke_kernel(*pn.kernel, context, done);
  }
  stream_of(pn).enqueue([&pn, &context, space, done = std::move(done)] {
    ScopedMemoryAccess access(space, pn.kernel->uses_host_memory());
    invoke_kernel(*pn.kernel, context,
                  [&pn, done](Status status) { report_when_device_done(stream_of(pn), std::move(status), done); });
  });
}

}  // namespace executor_detail

struct Executor::StepState {
  explicit StepState(const ExecutionPlan& plan)
      : groups(plan.collective_groups),
        values(plan.num_values), events(plan.nodes.size()), pending(new std::atomic<int32_t>[plan.nodes.size()]),
        uses(new std::atomic<int32_t>[plan.nodes.size()]) {}

  const std::vector<std::string>& groups;  // the plan's collective groups
  std::vector<Tensor> values;
  std::vector<std::shared_ptr<Event>> events;  // by node: recorded after it on its stream (records_event)
  std::vector<int64_t> instances;  // by collective group of the plan: which execution of it this step is
  std::optional<oneapi::tbb::task_arena> arena;  // where asynchronous kernels' continuations go
  std::unique_ptr<std::atomic<int32_t>[]> pending;
  std::unique_ptr<std::atomic<int32_t>[]> uses;
  std::atomic<bool> failed{false};
  StepObserver* observer = nullptr;  // told of each node's kernel (Executor::run)
  std::mutex error_mutex;
  Status error;
  CapturedStep* capture = nullptr;  // while the step is recorded (Note [Captured steps])

  // The first failure wins; it also abandons the step's collective calls still waiting for
  // participants, which the failure may have kept from coming (they would wait for their deadline).
  void record(Status status) {
    {
      std::lock_guard lock(error_mutex);
      if (!error.ok()) return;
      error = std::move(status);
      failed.store(true, std::memory_order_release);
    }
    if (communicators != nullptr) communicators->abandon(executions(), error);
  }

  // The collectives' executions this step is part of.
  std::vector<CollectiveInstance> executions() const {
    std::vector<CollectiveInstance> out;
    for (size_t g = 0; g < groups.size(); ++g) out.push_back({groups[g], instances[g]});
    return out;
  }

  const CommunicatorSet* communicators = nullptr;
};

// An asynchronous kernel in flight: its context lives until the continuation (a deferred task of
// the step, which the step's wait counts) has run.
struct Executor::AsyncNode {
  AsyncNode(const Executor& executor, StepState& step, const PlanNode& pn)
      : reusable(pn.reuses_inputs ? executor.reusable_inputs(step, pn) : std::vector<bool>()),
        context(executor.context_for(step, pn, reusable)) {}

  std::vector<bool> reusable;
  KernelContext context;
  Status status;
  oneapi::tbb::task_handle continuation;
};

// Where each node of a recorded step runs (Note [Captured steps]), and whether it can be recorded.
struct Executor::CapturePlan {
  // On a device with streams (recorded); on the host before the devices' work (it depends on none:
  // run before each replay); on the host after it (it feeds none: run after each replay).
  enum class Role : uint8_t { device, before, after };
  std::string refusal;  // why the step cannot be recorded; empty when it can
  std::vector<Role> roles;                      // by node
  std::vector<std::vector<uint32_t>> follows;   // by node: the nodes it runs after (data and control)
  std::vector<uint32_t> before, after;          // the host nodes of each kind, in plan order
};

// A recorded step: the recording of its devices' streams, the step's state (values, kernel contexts)
// that the recording's work uses, and the holds on the blocks freed while it recorded.
struct Executor::CapturedStep {
  CapturePlan plan;
  std::unique_ptr<StepCapture> recording;
  std::unique_ptr<StepState> state;
  std::vector<const Device*> feed_devices;  // by feed: the device whose memory holds it (null: the host's)
  std::vector<std::unique_ptr<FreedBlockHold>> holds;
  // A host value computed before the devices' work that the recording reads: its slot, the buffer the
  // recording reads (host memory a GPU may copy from while recorded: pinned), and while recording, the
  // value computed. Before each replay the slot's value is copied into the buffer.
  struct HostInput {
    uint32_t slot;
    Tensor recorded, computed;
  };
  std::shared_ptr<Allocator> host_input_allocator;
  std::vector<HostInput> host_inputs;

  void add_host_input(HostInput input) {
    std::lock_guard lock(mutex);
    host_inputs.push_back(std::move(input));
  }
  void keep(std::unique_ptr<AsyncNode> node) {
    std::lock_guard lock(mutex);
    nodes.push_back(std::move(node));
  }
  // A kernel of the recording failed (while recording on a GPU, or in a replay); the first failure wins.
  void fail(Status status) {
    std::lock_guard lock(mutex);
    if (error.ok()) error = std::move(status);
  }
  Status take_error() {
    std::lock_guard lock(mutex);
    return std::exchange(error, Status());
  }

 private:
  std::mutex mutex;
  std::vector<std::unique_ptr<AsyncNode>> nodes;
  Status error;
};

}  // namespace mirra::runtime
