// place_nodes and insert_copies.
#include "runtime/placement.h"

#include <map>

#include "graph/verify.h"

namespace mirra::runtime {

using graph::NodeId;
using graph::ValueRef;

namespace {

// Where argument `i` of placed node `node` lives: host memory when its kernel says so in `mask`
// (KernelDef::host_memory_inputs or host_memory_outputs), else its device's memory.
MemorySpace argument_memory_space(const graph::Node& node, size_t i, uint32_t KernelDef::*mask,
                                  const KernelRegistry& kernels, const DeviceSet& devices) {
  const KernelDef* kernel = kernels.find(node.op, node.device->kind);
  if (kernel != nullptr && in_host_memory(kernel->*mask, i)) return MemorySpace::host_memory();
  return devices.find(*node.device)->memory_space();
}

// The memory space input `input` of placed node `node` must be in.
MemorySpace input_memory_space(const graph::Node& node, size_t input, const KernelRegistry& kernels,
                               const DeviceSet& devices) {
  return argument_memory_space(node, input, &KernelDef::host_memory_inputs, kernels, devices);
}

}  // namespace

MemorySpace value_memory_space(const graph::Node& node, size_t output, const KernelRegistry& kernels,
                               const DeviceSet& devices) {
  return argument_memory_space(node, output, &KernelDef::host_memory_outputs, kernels, devices);
}

graph::Status place_nodes(graph::Graph& graph, const KernelRegistry& kernels, const DeviceSet& devices,
                          const PlacementOptions& options) {
  const graph::DeviceId host{graph::DeviceKind::cpu, 0};
  for (NodeId id = 0; id < graph.size(); ++id) {
    graph::Node& node = graph.mutable_node(id);
    const graph::DeviceId wanted = node.device.value_or(options.default_device);
    const Device* device = devices.find(wanted);
    if (device == nullptr && wanted.task) {
      return graph::unimplemented("node '" + node.name + "' is placed on " + wanted.to_string() + ", a device of task " +
                                  std::to_string(*wanted.task) +
                                  " (another process): values do not cross between tasks yet");
    }
    if (device == nullptr) {
      return graph::invalid_argument("node '" + node.name + "' is placed on " + wanted.to_string() +
                                     ", which this session does not have");
    }
    const std::optional<graph::DType> operand =
        node.inputs.empty() ? std::nullopt : std::optional(graph.type(node.inputs[0]).dtype);
    graph::Status supported = device->supports(node, kernels, operand);
    if (!supported.ok() && options.soft_placement && wanted != host && devices.find(host) != nullptr) {
      supported = devices.find(host)->supports(node, kernels, operand);
      if (supported.ok()) {
        node.device = host;
        continue;
      }
    }
    MIRRA_RETURN_IF_ERROR(supported);
    node.device = wanted;
  }
  return graph::Status();
}

graph::Status insert_copies(graph::Graph& graph, const KernelRegistry& kernels, const DeviceSet& devices) {
  const auto add_copy = [&](ValueRef value, std::string_view op, graph::DeviceId device) -> graph::Expected<ValueRef> {
    if (kernels.find(op, device.kind) == nullptr) {
      return graph::unimplemented("no " + std::string(graph::device_kind_name(device.kind)) + " kernel for " +
                                  std::string(op) + ", which moves values to and from " + device.to_string());
    }
    const graph::Node& producer = graph.node(value.node);
    graph::Node copy;
    copy.op = std::string(op);
    copy.name = graph.unique_name(producer.name + (op == kCopyToHostOp ? "/to_host" : "/to_" + device.to_string()));
    copy.inputs = {value};
    copy.outputs = {producer.outputs[value.output]};
    copy.device = device;
    return ValueRef{graph.add_node(std::move(copy)), 0};
  };
  // The copy of a value in a memory space, made once for every consumer there.
  std::map<std::pair<ValueRef, std::string>, ValueRef> copies;
  const size_t original = graph.size();
  for (NodeId id = 0; id < original; ++id) {
    for (size_t i = 0; i < graph.node(id).inputs.size(); ++i) {
      const ValueRef value = graph.node(id).inputs[i];
      const graph::DeviceId consumer_device = *graph.node(id).device;
      const MemorySpace from = value_memory_space(graph.node(value.node), value.output, kernels, devices);
      const MemorySpace to = input_memory_space(graph.node(id), i, kernels, devices);
      if (from == to) continue;
      auto& copied = copies[{value, to.to_string()}];
      if (!copied.valid()) {
        ValueRef moved = value;
        if (!from.host) {  // on the producer's device (a logical device's memory is named by another)
          MIRRA_ASSIGN_OR_RETURN(moved, add_copy(moved, kCopyToHostOp, *graph.node(value.node).device));
        }
        if (!to.host) {
          MIRRA_ASSIGN_OR_RETURN(moved, add_copy(moved, kCopyFromHostOp, consumer_device));
        }
        copied = moved;
      }
      graph.mutable_node(id).inputs[i] = copied;
    }
  }
  return graph::Status();
}

graph::Status prepare_graph(graph::Graph& graph, const KernelRegistry& kernels, const DeviceSet& devices,
                            const PlacementOptions& options) {
  MIRRA_RETURN_IF_ERROR(place_nodes(graph, kernels, devices, options));
  MIRRA_RETURN_IF_ERROR(graph::verify_structure(graph).with_context("after placement"));
  MIRRA_RETURN_IF_ERROR(insert_copies(graph, kernels, devices));
  return graph::verify_structure(graph).with_context("after copy insertion");
}

}  // namespace mirra::runtime
