// partition_by_task: one graph per task, with a Send and a Recv for each value crossing tasks.
#include "ops/task_partition.h"

#include <algorithm>
#include <string>

#include "graph/builder.h"

namespace mirra::ops {

namespace {

int task_of(const graph::Node& node) { return node.device && node.device->task ? *node.device->task : 0; }

}  // namespace

graph::Expected<std::map<int, TaskGraph>> partition_by_task(const graph::Graph& g, const graph::OpRegistry& ops) {
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::NodeId> order, g.topological_order());
  std::map<int, TaskGraph> parts;
  std::vector<graph::NodeId> copy_of(g.size(), graph::kInvalidNode);  // in its task's part
  std::map<std::pair<graph::ValueRef, int>, graph::ValueRef> received;  // (value, reading task) -> its Recv
  for (graph::NodeId id : order) {
    const graph::Node& node = g.node(id);
    const int task = task_of(node);
    TaskGraph& part = parts[task];
    graph::Node copy = node;
    for (graph::ValueRef& input : copy.inputs) {
      const graph::Node& producer = g.node(input.node);
      const int from = task_of(producer);
      if (from == task) {
        input = {copy_of[input.node], input.output};
        continue;
      }
      auto [found, added] = received.try_emplace({input, task});
      if (added) {
        const std::string group = producer.name + ":" + std::to_string(input.output) + "->task_" + std::to_string(task);
        TaskGraph& sender = parts[from];
        graph::Builder send(sender.graph, ops);
        send.set_device(producer.device);
        sender.sends.push_back(send.add({.op = "Send",
                                         .inputs = {{copy_of[input.node], input.output}},
                                         .attrs = {{"group", group}, {"peer_task", int64_t{task}}},
                                         .name = producer.name + "/send_" + std::to_string(input.output) + "_to_task_" +
                                                 std::to_string(task)}));
        MIRRA_RETURN_IF_ERROR(send.status());
        const graph::TensorType type = g.type(input);
        graph::Builder recv(part.graph, ops);
        recv.set_device(node.device);
        found->second = {recv.add({.op = "Recv",
                                   .attrs = {{"group", group}, {"peer_task", int64_t{from}}, {"dtype", type.dtype}, {"shape", type.shape}},
                                   .name = producer.name + "/recv_" + std::to_string(input.output)}),
                         0};
        MIRRA_RETURN_IF_ERROR(recv.status());
      }
      input = found->second;
    }
    for (graph::NodeId& control : copy.control_inputs) {
      if (task_of(g.node(control)) != task) {
        return graph::invalid_argument("partition_by_task: a control edge from '" + g.node(control).name + "' (task " +
                                       std::to_string(task_of(g.node(control))) + ") to '" + node.name + "' (task " +
                                       std::to_string(task) + "): tasks exchange values, not order");
      }
      control = copy_of[control];
    }
    copy_of[id] = part.graph.add_node(std::move(copy));
  }
  return parts;
}

std::vector<std::string> transfer_groups(const std::map<int, TaskGraph>& parts) {
  std::vector<std::string> groups;
  for (const auto& [task, part] : parts) {
    for (graph::NodeId send : part.sends) groups.push_back(*part.graph.node(send).attrs.get<std::string>("group"));
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

}  // namespace mirra::ops
