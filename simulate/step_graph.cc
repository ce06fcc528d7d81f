// step_graph: the replica's nodes, bound, costed and timed.
#include "simulate/step_graph.h"

#include <algorithm>
#include <map>

#include "graph/op_registry.h"

namespace mirra::simulate {

namespace {

// Which collective a node of the collective op family is, if any that runs each step.
std::optional<CollectiveKind> collective_kind(const std::string& op) {
  if (op == "AllReduce") return CollectiveKind::all_reduce;
  if (op == "ReduceScatter") return CollectiveKind::reduce_scatter;
  if (op == "AllGather") return CollectiveKind::all_gather;
  return std::nullopt;
}

}  // namespace

double kernel_seconds(const graph::OpCost& cost, graph::DType dtype, const DeviceSpec& device) {
  if (cost.flops <= 0 && cost.bytes <= 0) return 0;
  const double compute = cost.flops / device.achieved_flops(dtype);
  const double memory = cost.bytes / (device.memory_bandwidth * device.memory_efficiency);
  return std::max(compute, memory) + device.kernel_overhead;
}

graph::Expected<StepGraph> step_graph(const graph::Graph& graph, std::span<const graph::NodeId> roots,
                                      const runtime::DimBindings& dims, const graph::DeviceId& replica,
                                      const DeviceSpec& device) {
  MIRRA_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph.topological_order());
  const std::vector<bool> needed = graph.needed_for(roots);
  std::erase_if(order, [&](graph::NodeId id) { return !needed[id]; });
  const auto types = runtime::bound_types(graph, dims, order);
  MIRRA_CHECK(dims.schemas != nullptr, "step_graph infers the bound shapes again: it needs the schemas");
  const graph::OpRegistry& schemas = *dims.schemas;
  StepGraph step;
  std::map<graph::NodeId, size_t> index;
  for (const graph::NodeId id : order) {
    const graph::Node& node = graph.node(id);
    const std::optional<CollectiveKind> kind = collective_kind(node.op);
    const int64_t* rank = node.attrs.get<int64_t>("rank");
    const bool replica_0_rank = kind && rank != nullptr && *rank == 0;  // wherever the plan put it (the host)
    if (!replica_0_rank && (!node.device || !(*node.device == replica))) continue;
    StepNode s{.name = node.name, .op = node.op};
    std::vector<graph::TensorType> inputs;
    for (const graph::ValueRef input : node.inputs) {
      inputs.push_back(types[input.node][input.output]);
      if (auto it = index.find(input.node); it != index.end()) s.inputs.push_back(it->second);
    }
    for (const graph::NodeId control : node.control_inputs) {
      if (auto it = index.find(control); it != index.end()) s.inputs.push_back(it->second);
    }
    std::sort(s.inputs.begin(), s.inputs.end());
    s.inputs.erase(std::unique(s.inputs.begin(), s.inputs.end()), s.inputs.end());
    for (const graph::TensorType& t : types[id]) {
      if (!t.shape.num_elements()) {
        return graph::invalid_argument("simulate: '" + node.name + "' (" + node.op + ") has " + t.to_string() +
                                       ", whose size the batch size does not bind");
      }
    }
    if (kind) {
      s.collective = true;
      s.kind = *kind;
      for (const graph::TensorType& t : inputs) s.bytes += graph::CostContext::bytes(t);
    } else {
      const graph::OpSchema* schema = schemas.find(node.op);
      if (schema == nullptr) return graph::not_found("simulate: no schema for op '" + node.op + "' of '" + node.name + "'");
      const graph::OpCost cost = graph::op_cost(*schema, {.node = node, .inputs = inputs, .outputs = types[id]});
      const graph::DType dtype = !inputs.empty() ? inputs[0].dtype : (types[id].empty() ? graph::DType::f32 : types[id][0].dtype);
      s.seconds = kernel_seconds(cost, dtype, device);
    }
    index[id] = step.nodes.size();
    step.nodes.push_back(std::move(s));
  }
  return step;
}

}  // namespace mirra::simulate
