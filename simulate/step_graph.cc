// step_graph: the replica's nodes, bound, costed and timed.
#include "simulate/step_graph.h"

#include <algorithm>
#include <map>
#include <queue>

#include "graph/op_registry.h"

namespace mirra::simulate {

namespace {

// Which collective a node is (its op's schema spans the replicas), if any: nullopt for a kernel;
// an error for a collective the cost model does not know.
graph::Expected<std::optional<CollectiveKind>> collective_kind(const graph::Node& node, const graph::OpRegistry& schemas) {
  const graph::OpSchema* schema = schemas.find(node.op);
  if (schema == nullptr || !schema->has(graph::kCollective)) return std::optional<CollectiveKind>();
  if (node.op == "AllReduce") return std::optional(CollectiveKind::all_reduce);
  if (node.op == "ReduceScatter") return std::optional(CollectiveKind::reduce_scatter);
  if (node.op == "AllGather") return std::optional(CollectiveKind::all_gather);
  return graph::unimplemented("simulate: '" + node.name + "' is a " + node.op +
                              ", a collective whose cost is not modelled (AllReduce, ReduceScatter and AllGather are)");
}

// The kernel's time in the measured run (or its twins'), if it timed it.
const double* measured_seconds(const MeasuredCosts* measured, const std::string& name) {
  return measured == nullptr ? nullptr : measured_kernel_seconds(*measured, name);
}

}  // namespace

double kernel_seconds(const graph::OpCost& cost, graph::DType dtype, const DeviceSpec& device) {
  if (cost.flops <= 0 && cost.bytes <= 0) return 0;
  const double compute = cost.flops / device.achieved_flops(dtype);
  const double memory = cost.bytes / (device.memory_bandwidth * device.memory_efficiency);
  return std::max(compute, memory) + device.kernel_overhead;
}

graph::Expected<StepGraph> step_graph(const graph::Graph& graph, std::span<const graph::NodeId> roots,
                                      const runtime::DimBindings& dims, std::span<const graph::DeviceId> replicas,
                                      const DeviceSpec& device, const MeasuredCosts* measured) {
  MIRRA_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph.topological_order());
  const std::vector<bool> needed = graph.needed_for(roots);
  std::erase_if(order, [&](graph::NodeId id) { return !needed[id]; });
  const auto types = runtime::bound_types(graph, dims, order);
  MIRRA_CHECK(dims.schemas != nullptr, "step_graph infers the bound shapes again: it needs the schemas");
  const graph::OpRegistry& schemas = *dims.schemas;
  // The step's nodes in graph order: each replica's kernels, and one node per collective group that
  // stands for all its ranks (it starts once every rank's inputs are ready).
  StepGraph unordered;
  if (measured != nullptr) unordered.lanes = measured->concurrency;
  unordered.devices = static_cast<int>(replicas.size());
  std::map<graph::NodeId, size_t> index;
  std::map<std::string, size_t> group_node;
  std::vector<std::vector<graph::NodeId>> members;  // the graph's nodes each step node stands for
  for (const graph::NodeId id : order) {
    const graph::Node& node = graph.node(id);
    MIRRA_ASSIGN_OR_RETURN(const std::optional<CollectiveKind> kind, collective_kind(node, schemas));
    const auto replica = std::find_if(replicas.begin(), replicas.end(),
                                      [&](const graph::DeviceId& d) { return node.device && *node.device == d; });
    if (!kind && replica == replicas.end()) continue;
    const std::string* group = node.attrs.get<std::string>("group");
    if (kind && group != nullptr) {
      if (const auto it = group_node.find(*group); it != group_node.end()) {
        index[id] = it->second;
        members[it->second].push_back(id);
        continue;
      }
    }
    for (const graph::TensorType& t : types[id]) {
      if (!t.shape.num_elements()) {
        return graph::invalid_argument("simulate: '" + node.name + "' (" + node.op + ") has " + t.to_string() +
                                       ", whose size the batch size does not bind");
      }
    }
    std::vector<graph::TensorType> inputs;
    for (const graph::ValueRef input : node.inputs) inputs.push_back(types[input.node][input.output]);
    StepNode s{.name = group != nullptr && kind ? *group : node.name, .op = node.op};
    if (kind) {
      s.collective = true;
      s.kind = *kind;
      for (const graph::TensorType& t : inputs) s.bytes += graph::CostContext::bytes(t);
      if (group != nullptr) group_node[*group] = unordered.nodes.size();
    } else if (const double* timed = measured_seconds(measured, node.name)) {
      s.device = static_cast<int>(replica - replicas.begin());
      s.seconds = *timed + measured->dispatch_seconds;
      ++unordered.measured_kernels;
    } else {
      const graph::OpSchema* schema = schemas.find(node.op);
      if (schema == nullptr) return graph::not_found("simulate: no schema for op '" + node.op + "' of '" + node.name + "'");
      const graph::OpCost cost = graph::op_cost(*schema, {.node = node, .inputs = inputs, .outputs = types[id]});
      const graph::DType dtype = !inputs.empty() ? inputs[0].dtype : (types[id].empty() ? graph::DType::f32 : types[id][0].dtype);
      s.device = static_cast<int>(replica - replicas.begin());
      s.seconds = kernel_seconds(cost, dtype, device);
      ++unordered.roofline_kernels;
    }
    index[id] = unordered.nodes.size();
    members.push_back({id});
    unordered.nodes.push_back(std::move(s));
  }
  // Each node's inputs: those of the graph's nodes it stands for, within the step.
  const size_t n = unordered.nodes.size();
  std::vector<std::vector<size_t>> readers(n);
  std::vector<size_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t>& inputs = unordered.nodes[i].inputs;
    for (const graph::NodeId id : members[i]) {
      const graph::Node& node = graph.node(id);
      for (const graph::ValueRef input : node.inputs) {
        if (auto it = index.find(input.node); it != index.end()) inputs.push_back(it->second);
      }
      for (const graph::NodeId control : node.control_inputs) {
        if (auto it = index.find(control); it != index.end()) inputs.push_back(it->second);
      }
    }
    std::sort(inputs.begin(), inputs.end());
    inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
    std::erase(inputs, i);
    for (const size_t input : inputs) readers[input].push_back(i);
    waiting[i] = inputs.size();
  }
  // Their topological order, the earliest in graph order first (a group where its first rank was).
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::vector<size_t> position(n);
  StepGraph step{.lanes = unordered.lanes, .devices = unordered.devices, .measured_kernels = unordered.measured_kernels,
                 .roofline_kernels = unordered.roofline_kernels};
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    position[i] = step.nodes.size();
    step.nodes.push_back(std::move(unordered.nodes[i]));
    for (const size_t reader : readers[i]) {
      if (--waiting[reader] == 0) ready.push(reader);
    }
  }
  if (step.nodes.size() != n) return graph::internal_error("simulate: the step's collectives wait for each other in a cycle");
  for (StepNode& node : step.nodes) {
    for (size_t& input : node.inputs) input = position[input];
    std::sort(node.inputs.begin(), node.inputs.end());
  }
  return step;
}

}  // namespace mirra::simulate
