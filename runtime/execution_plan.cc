// build_plan: pruning, ordering, slots and counts.
#include "runtime/execution_plan.h"

#include <algorithm>
#include <map>
#include <string>

namespace mirra::runtime {

using graph::Expected;
using graph::NodeId;

namespace {

// Nodes the request needs: everything the fetches and targets depend on, stopping at fed nodes, and
// with a collective's rank every rank of its group the graph holds (the others would wait for it).
std::vector<bool> needed_nodes(const graph::Graph& graph, const PlanRequest& request, const KernelRegistry& kernels,
                               graph::DeviceId default_device) {
  std::map<std::string, std::vector<NodeId>, std::less<>> ranks;  // by group
  std::vector<const std::string*> group_of(graph.size(), nullptr);
  for (const graph::Node& node : graph.nodes()) {
    const KernelDef* kernel = kernels.find(node.op, node.device.value_or(default_device).kind);
    const std::string* group = node.attrs.get<std::string>("group");
    if (kernel == nullptr || !kernel->collective || group == nullptr) continue;
    group_of[node.id] = group;
    ranks[*group].push_back(node.id);
  }
  std::vector<bool> needed(graph.size(), false);
  std::vector<bool> fed(graph.size(), false);
  for (NodeId id : request.fed) fed[id] = true;
  std::vector<NodeId> stack;
  auto visit = [&](NodeId id) {
    if (!needed[id]) {
      needed[id] = true;
      if (!fed[id]) stack.push_back(id);
    }
  };
  for (const auto& fetch : request.fetches) visit(fetch.node);
  for (NodeId target : request.targets) visit(target);
  while (!stack.empty()) {
    const graph::Node& node = graph.node(stack.back());
    stack.pop_back();
    for (const auto& input : node.inputs) visit(input.node);
    for (NodeId control : node.control_inputs) visit(control);
    if (group_of[node.id] != nullptr) {
      for (NodeId peer : ranks.find(*group_of[node.id])->second) visit(peer);
    }
  }
  return needed;
}

void append_unique(std::vector<uint32_t>& list, size_t begin, uint32_t value) {
  if (std::find(list.begin() + static_cast<ptrdiff_t>(begin), list.end(), value) == list.end()) list.push_back(value);
}

// Whether `consumer` reads an output of graph node `producer` in host memory
// (KernelDef::host_memory_inputs): its kernel reads that value on the host when it is launched.
bool reads_on_the_host(const PlanNode& consumer, NodeId producer) {
  if (consumer.kernel == nullptr || consumer.kernel->host_memory_inputs == 0) return false;
  const std::vector<graph::ValueRef>& inputs = consumer.node->inputs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].node == producer && in_host_memory(consumer.kernel->host_memory_inputs, k)) return true;
  }
  return false;
}

// Whether node `producer`, on a stream, hands `consumer` over when it is enqueued (an early
// consumer: it follows on the same stream, or waits for the producer's event on another) rather
// than when its device has run it. Not a consumer off streams; not one that reads the producer's
// output on the host (a learning rate copied to the host, a copy to another device's memory through
// the host), since a GPU stream launches work at once and its copy to the host lands later; and, of
// a collective on a communication stream, only consumers on that same stream, so the others (the
// updates on the compute stream) do not hold up their stream waiting for it.
bool hands_over_at_enqueue(const PlanNode& producer, const PlanNode& consumer) {
  if (!producer.on_stream || !consumer.on_stream || reads_on_the_host(consumer, producer.node->id)) return false;
  return !producer.on_communication_stream || (consumer.device == producer.device && consumer.on_communication_stream);
}

}  // namespace

Expected<ExecutionPlan> build_plan(const graph::Graph& graph, const PlanRequest& request,
                                   const KernelRegistry& kernels, const DeviceSet& devices,
                                   graph::DeviceId default_device) {
  for (const auto& fetch : request.fetches) {
    if (fetch.node >= graph.size() || fetch.output >= graph.node(fetch.node).outputs.size()) {
      return graph::invalid_argument("fetch refers to a value the graph does not have");
    }
  }
  for (NodeId id : request.targets) {
    if (id >= graph.size()) return graph::invalid_argument("target refers to a node the graph does not have");
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<NodeId> order, graph.topological_order());
  const std::vector<bool> needed = needed_nodes(graph, request, kernels, default_device);
  std::vector<bool> fed(graph.size(), false);
  for (NodeId id : request.fed) fed[id] = true;

  ExecutionPlan plan;
  std::vector<uint32_t> plan_index(graph.size(), kNotInPlan);
  for (NodeId id : order) {
    if (!needed[id]) continue;
    const graph::Node& node = graph.node(id);
    PlanNode pn;
    pn.node = &node;
    pn.fed = fed[id];
    const graph::DeviceId device_id = node.device.value_or(default_device);
    pn.device = devices.find(device_id);
    if (pn.device == nullptr) {
      return graph::invalid_argument("node '" + node.name + "' is placed on " + device_id.to_string() +
                                     ", which this session does not have");
    }
    if (!pn.fed) {
      const KernelDef* kernel = kernels.find(node.op, device_id.kind);
      if (kernel == nullptr) {
        return graph::unimplemented("node '" + node.name + "': no " + std::string(graph::device_kind_name(device_id.kind)) +
                                    " kernel for op '" + node.op + "'");
      }
      pn.kernel = kernel;
      pn.fn = kernel->fn;
      pn.expensive = kernel->expensive;
      pn.reuses_inputs = kernel->reuses_inputs;
      pn.host_memory_outputs = kernel->host_memory_outputs;
      pn.completes_later = kernel->async_fn != nullptr || pn.device->asynchronous();
      pn.on_stream = pn.device->asynchronous() && kernel->async_fn == nullptr;
      pn.on_communication_stream = pn.on_stream && kernel->on_communication_stream;
      // Which inputs are free to overwrite is decided on the host, which may not look at values a
      // stream has yet to produce.
      pn.reuses_inputs = pn.reuses_inputs && !pn.on_stream;
      plan.has_async_kernels |= pn.completes_later;
      plan.has_stream_nodes |= pn.on_stream;
    }
    int32_t& group = plan.collective_group_of.emplace_back(-1);
    if (pn.kernel != nullptr && pn.kernel->collective) {
      const std::string& name = graph::checked_attr<std::string>(node, "group");
      const auto known = std::find(plan.collective_groups.begin(), plan.collective_groups.end(), name);
      group = static_cast<int32_t>(known - plan.collective_groups.begin());
      if (known == plan.collective_groups.end()) plan.collective_groups.push_back(name);
      pn.collective = true;
    }
    std::unique_ptr<KernelState>& state = plan.kernel_states.emplace_back();
    if (pn.kernel != nullptr && pn.kernel->prepare != nullptr) {
      graph::Expected<std::unique_ptr<KernelState>> prepared = pn.kernel->prepare(node, *pn.device);
      if (!prepared.ok()) {
        return prepared.status().with_context("node '" + node.name + "' (" + node.op + ") on " + device_id.to_string());
      }
      state = std::move(*prepared);
    }
    pn.first_output = plan.num_values;
    pn.num_outputs = static_cast<uint32_t>(node.outputs.size());
    plan.num_values += pn.num_outputs;
    plan.value_owner.resize(plan.num_values, static_cast<uint32_t>(plan.nodes.size()));
    for (const graph::TensorType& type : node.outputs) {
      plan.outputs.push_back({type.dtype, static_cast<uint8_t>(type.shape.rank()),
                              static_cast<uint32_t>(plan.output_dims.size())});
      plan.output_dims.insert(plan.output_dims.end(), type.shape.dims.begin(), type.shape.dims.end());
    }
    plan_index[id] = static_cast<uint32_t>(plan.nodes.size());
    plan.nodes.push_back(pn);
  }

  // Inputs, producers and pending counts (fed nodes read nothing and wait for nothing).
  std::vector<std::vector<uint32_t>> consumers(plan.nodes.size());
  plan.stream_orders.resize(plan.nodes.size());
  for (uint32_t i = 0; i < plan.nodes.size(); ++i) {
    PlanNode& pn = plan.nodes[i];
    if (pn.fed) continue;
    pn.inputs_begin = static_cast<uint32_t>(plan.input_slots.size());
    pn.producers_begin = static_cast<uint32_t>(plan.producers.size());
    for (const auto& input : pn.node->inputs) {
      const uint32_t producer = plan_index[input.node];
      plan.input_slots.push_back(plan.nodes[producer].first_output + input.output);
      append_unique(plan.producers, pn.producers_begin, producer);
    }
    pn.inputs_end = static_cast<uint32_t>(plan.input_slots.size());
    pn.producers_end = static_cast<uint32_t>(plan.producers.size());
    std::vector<uint32_t> waits_for(plan.producers.begin() + pn.producers_begin, plan.producers.end());
    for (NodeId control : pn.node->control_inputs) {
      if (std::find(waits_for.begin(), waits_for.end(), plan_index[control]) == waits_for.end()) {
        waits_for.push_back(plan_index[control]);
      }
    }
    plan.stream_orders[i].waits_begin = static_cast<uint32_t>(plan.stream_waits.size());
    for (uint32_t producer : waits_for) {
      PlanNode& p = plan.nodes[producer];
      if (p.fed) continue;
      ++pn.initial_pending;
      consumers[producer].push_back(i);
      const bool other_stream = p.device != pn.device || p.on_communication_stream != pn.on_communication_stream;
      if (other_stream && hands_over_at_enqueue(p, pn)) {  // otherwise the device ran p before pn is ready
        plan.stream_waits.push_back(producer);
        p.records_event = true;
      }
    }
    plan.stream_orders[i].waits_end = static_cast<uint32_t>(plan.stream_waits.size());
    for (uint32_t p = pn.producers_begin; p < pn.producers_end; ++p) ++plan.nodes[plan.producers[p]].initial_uses;
  }
  for (uint32_t i = 0; i < plan.nodes.size(); ++i) {
    PlanNode& pn = plan.nodes[i];
    pn.consumers_begin = static_cast<uint32_t>(plan.consumers.size());
    // The consumers a node on a stream hands over when it is enqueued go first.
    const auto early = [&](uint32_t c) { return hands_over_at_enqueue(pn, plan.nodes[c]); };
    std::stable_partition(consumers[i].begin(), consumers[i].end(), early);
    plan.consumers.insert(plan.consumers.end(), consumers[i].begin(), consumers[i].end());
    pn.consumers_end = static_cast<uint32_t>(plan.consumers.size());
    uint32_t& early_end = plan.stream_orders[i].early_consumers_end;
    early_end = pn.consumers_begin;
    while (early_end < pn.consumers_end && early(plan.consumers[early_end])) ++early_end;
    if (!pn.fed && pn.initial_pending == 0) plan.initially_ready.push_back(i);
  }
  for (const auto& fetch : request.fetches) {
    PlanNode& pn = plan.nodes[plan_index[fetch.node]];
    plan.fetch_slots.push_back(pn.first_output + fetch.output);
    ++pn.initial_uses;  // held until the step ends; extra holds for repeated fetches are harmless
  }
  for (NodeId id : request.fed) plan.fed_nodes.push_back(plan_index[id]);
  return plan;
}

}  // namespace mirra::runtime
