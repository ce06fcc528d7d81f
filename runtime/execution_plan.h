// ExecutionPlan: what the executor needs to run one (feeds, fetches, targets) request of a graph,
// computed once and reused every step: the nodes needed (pruned, in topological order), their
// kernels, the state each kernel built for its node (KernelDef::prepare), devices, value slots,
// producer and consumer lists, initial pending counts, and the collective groups its nodes meet in.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/device.h"
#include "runtime/kernel.h"

namespace mirra::runtime {

inline constexpr uint32_t kNotInPlan = 0xFFFFFFFFu;

struct PlanRequest {
  std::vector<graph::NodeId> fed;  // nodes whose output 0 is fed (they do not run)
  std::vector<graph::ValueRef> fetches;
  std::vector<graph::NodeId> targets;  // run, nothing fetched
};

// What a node's output must look like, stored flat in the plan so that checking it after each kernel
// touches no graph memory.
struct OutputSpec {
  graph::DType dtype = graph::DType::f32;
  uint8_t rank = 0;
  uint32_t dims_begin = 0;  // in ExecutionPlan::output_dims; -1 dims match anything
};

// One node of the plan. What each step reads is kept here, small and flat (a wide graph strides
// through these); the rest of the kernel's definition stays in the registry.
struct PlanNode {
  const graph::Node* node = nullptr;
  const KernelDef* kernel = nullptr;  // in the session's KernelRegistry; null for fed nodes
  KernelFn fn = nullptr;              // kernel->fn
  Device* device = nullptr;
  uint32_t first_output = 0;  // value slot of output 0; outputs are consecutive, as are their OutputSpecs
  uint32_t num_outputs = 0;
  uint32_t inputs_begin = 0, inputs_end = 0;        // value slots, in ExecutionPlan::input_slots
  uint32_t producers_begin = 0, producers_end = 0;  // distinct data producers, in ExecutionPlan::producers
  uint32_t consumers_begin = 0, consumers_end = 0;  // distinct data/control consumers, in ::consumers
  int32_t initial_pending = 0;  // producers (data or control) that must finish first; fed ones excluded
  int32_t initial_uses = 0;     // consumers that read its outputs, +1 when an output is fetched
  uint32_t host_memory_outputs = 0;  // kernel->host_memory_outputs
  // Flags in one byte, so the node stays 80 bytes.
  bool fed : 1 = false;
  bool expensive : 1 = false;        // kernel->expensive
  bool reuses_inputs : 1 = false;    // kernel->reuses_inputs
  bool completes_later : 1 = false;  // an asynchronous kernel, or its device runs it on a stream of its own
  bool on_stream : 1 = false;        // a kernel enqueued on its device's stream: done for its stream
                                     // successors when enqueued, for the others when the stream ran it
  bool records_event : 1 = false;    // a consumer on another stream waits for an event after it
  bool on_communication_stream : 1 = false;  // on_stream, on its device's communication stream
  bool collective : 1 = false;               // its group is ExecutionPlan::collective_group_of's
};
static_assert(sizeof(PlanNode) <= 80, "a plan node's flags and counts fit in 80 bytes");

// How a node on a stream is ordered with other streams (read only for such nodes, so kept apart).
struct StreamOrder {
  // Its consumers that run on streams come first in ExecutionPlan::consumers, up to this end; they
  // are made ready when it is enqueued.
  uint32_t early_consumers_end = 0;
  uint32_t waits_begin = 0, waits_end = 0;  // producers on other streams, in ExecutionPlan::stream_waits
};

struct ExecutionPlan {
  std::vector<PlanNode> nodes;  // topological order
  std::vector<uint32_t> input_slots;
  std::vector<uint32_t> producers;
  std::vector<uint32_t> consumers;
  std::vector<StreamOrder> stream_orders;  // by node
  std::vector<uint32_t> stream_waits;
  std::vector<OutputSpec> outputs;  // by value slot
  std::vector<uint32_t> value_owner;  // by value slot: the plan node that produces it
  std::vector<int64_t> output_dims;
  uint32_t num_values = 0;
  std::vector<uint32_t> fed_nodes;          // plan index of each PlanRequest::fed entry (kNotInPlan: unused)
  std::vector<uint32_t> fetch_slots;        // value slot of each PlanRequest::fetches entry
  std::vector<uint32_t> initially_ready;    // nodes with nothing to wait for
  std::vector<std::unique_ptr<KernelState>> kernel_states;  // by node: what its kernel prepared, or null
  std::vector<std::string> collective_groups;  // the groups of its collectives' nodes, each once
  std::vector<int32_t> collective_group_of;    // by node: its group's index in collective_groups, or -1 (read
                                               // only for PlanNode::collective nodes, so kept apart)
  bool has_async_kernels = false;  // a node completes_later
  bool has_stream_nodes = false;   // a node is on_stream

  std::span<const uint32_t> inputs_of(const PlanNode& n) const {
    return {input_slots.data() + n.inputs_begin, n.inputs_end - n.inputs_begin};
  }
  std::span<const uint32_t> producers_of(const PlanNode& n) const {
    return {producers.data() + n.producers_begin, n.producers_end - n.producers_begin};
  }
  std::span<const uint32_t> consumers_of(const PlanNode& n) const {
    return {consumers.data() + n.consumers_begin, n.consumers_end - n.consumers_begin};
  }
  // For a node on a stream: the consumers made ready when it is enqueued, and the others.
  std::span<const uint32_t> early_consumers_of(uint32_t index) const {
    const PlanNode& n = nodes[index];
    return {consumers.data() + n.consumers_begin, stream_orders[index].early_consumers_end - n.consumers_begin};
  }
  std::span<const uint32_t> late_consumers_of(uint32_t index) const {
    const PlanNode& n = nodes[index];
    const uint32_t early_end = stream_orders[index].early_consumers_end;
    return {consumers.data() + early_end, n.consumers_end - early_end};
  }
  std::span<const uint32_t> stream_waits_of(uint32_t index) const {
    const StreamOrder& order = stream_orders[index];
    return {stream_waits.data() + order.waits_begin, order.waits_end - order.waits_begin};
  }
};

// Errors: a fetch or target out of range, a node with no kernel for its device, a device the
// session does not have.
graph::Expected<ExecutionPlan> build_plan(const graph::Graph& graph, const PlanRequest& request,
                                          const KernelRegistry& kernels, const DeviceSet& devices,
                                          graph::DeviceId default_device);

}  // namespace mirra::runtime
