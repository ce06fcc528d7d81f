// Kernels: functions `Status(KernelContext&)`, one table per device kind (KernelRegistry). The
// runtime calls kernels through this table; the only ops it names are the copies placement inserts
// between memory spaces (runtime/placement.h). A kernel reads its node's inputs from the context and
// must set every output. A kernel with per-node state (its attributes parsed, the library primitives
// it built for the shapes it has seen) declares a `prepare` function that builds a KernelState once
// per node and device when the execution plan is built (TensorFlow's OpKernel constructor); every
// run of the node reads it through KernelContext::state. An asynchronous kernel (TensorFlow's
// AsyncOpKernel) instead returns at once and reports through a done callback, for work that waits on
// something outside the node (a collective's peers, a device stream).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/check.h"
#include "graph/node.h"
#include "graph/op_schema.h"
#include "graph/status.h"
#include "runtime/collectives/communicator.h"
#include "runtime/device.h"
#include "runtime/tensor.h"
#include "runtime/variable_store.h"

namespace mirra::runtime {

using graph::Status;

// What a session lends every kernel: its variables and its collectives.
struct SessionResources {
  VariableStore& variables;
  const CommunicatorSet& communicators;
};

// Whether bit i of a KernelDef::host_memory_inputs or host_memory_outputs mask is set.
inline bool in_host_memory(uint32_t mask, size_t i) { return i < 32 && (mask >> i & 1) != 0; }

// What a kernel builds once per (node, device) and keeps for every run of the node (KernelDef::
// prepare). Runs of one node may overlap (steps of one plan run concurrently), so what a state
// changes after it was built it guards itself (runtime/bounded_cache.h is thread-safe).
class KernelState {
 public:
  virtual ~KernelState() = default;
};

class KernelContext {
 public:
  KernelContext(const graph::Node& node, Device& device, const SessionResources& resources, int64_t collective_instance,
                Tensor* values, std::span<const uint32_t> input_slots, Tensor* outputs,
                const std::vector<bool>* reusable = nullptr, uint32_t host_memory_outputs = 0,
                KernelState* state = nullptr)
      : node_(node), device_(device), resources_(resources), collective_instance_(collective_instance), values_(values),
        input_slots_(input_slots), outputs_(outputs), reusable_(reusable), host_memory_outputs_(host_memory_outputs),
        state_(state) {}

  const graph::Node& node() const { return node_; }
  Device& device() const { return device_; }
  // What the session lends its kernels; its address tells one session from another.
  const SessionResources& resources() const { return resources_; }
  VariableStore& variables() const { return resources_.variables; }
  // The collective implementation `name` ("auto": the session's first), or not_found.
  graph::Expected<Communicator*> communicator(std::string_view name) const { return resources_.communicators.find(name); }
  // For a collective's node (KernelDef::collective): which execution of its group this run is,
  // the group's sequence number in the session (0 for other nodes).
  int64_t collective_instance() const { return collective_instance_; }

  size_t num_inputs() const { return input_slots_.size(); }
  const Tensor& input(size_t i) const { return values_[input_slots_[i]]; }
  // An input whose buffer the kernel updates in place: the value of a Variable, for the ops whose
  // schema lists it in `updates`. Nothing here orders the update after the variable's readers: the
  // graph must (ops::minimize gives each update a control edge from every reader).
  Tensor& input_for_update(size_t i) const { return values_[input_slots_[i]]; }
  size_t num_outputs() const { return node_.outputs.size(); }
  // True when this node is the last reader of input i and nothing else holds its buffer, so the
  // kernel may write its output there (set_output(j, input(i)) and compute in place). Only for
  // kernels registered with reuses_inputs; always false otherwise.
  bool input_reusable(size_t i) const { return reusable_ != nullptr && (*reusable_)[i]; }

  // A new uninitialised output tensor in this device's memory (in host memory for the outputs its
  // kernel declares host_memory_outputs).
  Tensor& allocate_output(size_t i, DType dtype, const TensorShape& shape) {
    const bool on_host = in_host_memory(host_memory_outputs_, i);
    outputs_[i] = Tensor::empty(on_host ? device_.host_memory_allocator() : device_.allocator(), dtype, shape);
    return outputs_[i];
  }
  // An output allocated or set before.
  Tensor& output(size_t i) const { return outputs_[i]; }
  // Sets an output to an existing tensor (forwarding an input, a variable's value).
  void set_output(size_t i, Tensor tensor) { outputs_[i] = std::move(tensor); }
  // Output i in input i's buffer where it is reusable (an in-place update), else a new tensor of its
  // dtype and shape.
  Tensor& output_in_place_of_input(size_t i) {
    if (input_reusable(i)) {
      set_output(i, input(i));
      return outputs_[i];
    }
    return allocate_output(i, input(i).dtype(), input(i).shape());
  }

  // The node's attribute `name`; the schema check guarantees it exists with this type.
  template <class T>
  const T& attr(std::string_view name) const {
    return graph::checked_attr<T>(node_, name);
  }
  // What the kernel's `prepare` built for this node (a kernel without one has none).
  template <class State>
  State& state() const {
    MIRRA_CHECK(state_ != nullptr, "kernel of node '" + node_.name + "' asks for a state its KernelDef does not prepare");
    return static_cast<State&>(*state_);
  }

 private:
  const graph::Node& node_;
  Device& device_;
  const SessionResources& resources_;
  int64_t collective_instance_;
  Tensor* values_;
  std::span<const uint32_t> input_slots_;
  Tensor* outputs_;
  const std::vector<bool>* reusable_;
  uint32_t host_memory_outputs_;
  KernelState* state_;
};

using KernelFn = Status (*)(KernelContext&);
// Completes an asynchronous kernel; called exactly once, from any thread.
using KernelDone = std::function<void(Status)>;
// Starts the node's work and returns without waiting for it. Until it calls `done` the context and
// its tensors stay valid; after, the kernel must not touch them. It may throw (bad_alloc) only
// before it calls or hands `done` to anyone. On a device with streams of its own it is called once
// the device has finished its inputs (in a step as it runs, on an executor thread; in a replay of a
// recorded step, on its stream), launches its device work on the streams it uses itself, and calls
// `done` once the device has run it.
using AsyncKernelFn = void (*)(KernelContext&, KernelDone done);
// Builds the node's KernelState on `device` when a plan is built; an error (an attribute the kernel
// cannot take) refuses the plan, naming the node.
using KernelPrepareFn = graph::Expected<std::unique_ptr<KernelState>> (*)(const graph::Node& node, const Device& device);

// Exactly one of `fn` and `async_fn` is set.
struct KernelDef {
  KernelFn fn = nullptr;
  // Expensive kernels (matrix products, convolutions) run as their own task; cheap ones run inline
  // on the thread that made them ready.
  bool expensive = false;
  // The kernel asks KernelContext::input_reusable (the executor then works out which inputs it may
  // overwrite; others pay nothing).
  bool reuses_inputs = false;
  AsyncKernelFn async_fn = nullptr;
  // The dtypes (of output 0) it takes, as a dtype_mask; 0: any. Placement refuses the others.
  uint32_t dtypes = 0;
  // The dtypes of input 0 it takes, likewise (for ops whose output type may differ from their
  // operands', such as products with f32_output).
  uint32_t operand_dtypes = 0;
  // Arguments that live in host memory whatever the device (bit i: input or output i): values the
  // host part of a device kernel reads, such as shapes or the learning rate. Copies are inserted so
  // they arrive there, and a device's stream may touch host memory while such a kernel runs.
  uint32_t host_memory_inputs = 0;
  uint32_t host_memory_outputs = 0;
  // A synchronous kernel that, on a device with streams of its own, runs on the device's
  // communication stream instead of its compute stream and launches its device work there (a
  // collective among devices that share memory), so the compute stream goes on while it waits for
  // other devices. The executor has the communication stream wait for what the compute stream has
  // queued first (what produced its inputs), and what the kernel allocates, outputs and scratch, is
  // for the communication stream (ScopedAllocationStream): no block freed by compute work that may
  // still be queued, and no block it frees goes to the compute stream's kernels.
  bool on_communication_stream = false;
  // Why a recorded step cannot hold the kernel (Note [Captured steps], runtime/executor.h), or null:
  // an asynchronous kernel whose completion reads on the host what the device computed (a GPU's
  // CheckNumerics), a collective whose replays would wait for its peers with no deadline (NCCL's).
  const char* not_capturable = nullptr;
  // Set when the kernel keeps state per node (KernelContext::state).
  KernelPrepareFn prepare = nullptr;
  // A collective's kernel: its node is one participant (a rank) of the group its `group` attribute
  // names; each run of the node is one execution of the group, which the session numbers
  // (KernelContext::collective_instance), and which a failed step abandons.
  bool collective = false;

  bool accepts(graph::DType dtype) const { return dtypes == 0 || (dtypes >> static_cast<int>(dtype) & 1) != 0; }
  bool accepts_operand(graph::DType dtype) const {
    return operand_dtypes == 0 || (operand_dtypes >> static_cast<int>(dtype) & 1) != 0;
  }
  bool uses_host_memory() const { return (host_memory_inputs | host_memory_outputs) != 0; }
};

// The mask of `dtypes`, for KernelDef::dtypes.
constexpr uint32_t dtype_mask(std::initializer_list<graph::DType> dtypes) {
  uint32_t mask = 0;
  for (graph::DType dtype : dtypes) mask |= uint32_t{1} << static_cast<int>(dtype);
  return mask;
}

class KernelRegistry {
 public:
  // A second kernel for the same op and device kind, or a definition without exactly one function,
  // is a bug and aborts.
  void add(std::string_view op, graph::DeviceKind kind, KernelDef def);
  // `op`'s kernel of kind `from` also for kind `to` (a kernel that never touches elements: views).
  void share(std::string_view op, graph::DeviceKind to, graph::DeviceKind from);
  // `op`'s kernel for `kind`, or else the kernel of the kind it runs the kernels of
  // (DeviceKindSpec::runs_kernels_of: cpu_async's are the CPU's), or null.
  const KernelDef* find(std::string_view op, graph::DeviceKind kind) const;

 private:
  std::map<std::pair<std::string, graph::DeviceKind>, KernelDef, std::less<>> kernels_;
};

}  // namespace mirra::runtime
