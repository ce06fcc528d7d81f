// partition_by_task: one graph per task, with a Send and a Recv for each value crossing tasks.
#include "ops/task_partition.h"

#include <algorithm>
#include <string>

#include "graph/builder.h"

namespace mirra::ops {

int task_of(const graph::Node& node) { return node.device && node.device->task ? *node.device->task : 0; }

namespace {


// Note [Order across tasks]
// A control edge from a node of another task, reader -> n, says that n (an update in place, say)
// runs after the reader has read a value: one that crossed from n's task, directly or through nodes
// of the reader's task that forward it (an Identity). In n's task that read is the value's Send,
// which finishes once the value is copied out, so n waits for those Sends instead. A reader that
// reads nothing of n's task leaves nothing to wait for there: refused.

// The Sends of `task` (by their ids in its part) whose values `reader`, of another task, reads
// directly or through nodes of its own task that forward their input.
std::vector<graph::NodeId> sends_read_by(const graph::Graph& g, const graph::OpRegistry& ops, graph::NodeId reader, int task,
                                         const std::map<std::pair<graph::ValueRef, int>, graph::NodeId>& sent) {
  const int reading_task = task_of(g.node(reader));
  std::vector<graph::NodeId> sends, stack = {reader};
  while (!stack.empty()) {
    const graph::Node& node = g.node(stack.back());
    stack.pop_back();
    for (graph::ValueRef input : node.inputs) {
      const graph::Node& producer = g.node(input.node);
      if (task_of(producer) == task) {
        if (const auto found = sent.find({input, reading_task}); found != sent.end()) sends.push_back(found->second);
      } else if (task_of(producer) == reading_task) {
        const graph::OpSchema* schema = ops.find(producer.op);
        if (schema != nullptr && schema->has(graph::kForwardsInput)) stack.push_back(producer.id);
      }
    }
  }
  std::sort(sends.begin(), sends.end());
  sends.erase(std::unique(sends.begin(), sends.end()), sends.end());
  return sends;
}

}  // namespace

graph::Expected<std::map<int, TaskGraph>> partition_by_task(const graph::Graph& g, const graph::OpRegistry& ops) {
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::NodeId> order, g.topological_order());
  std::map<int, TaskGraph> parts;
  std::vector<graph::NodeId> copy_of(g.size(), graph::kInvalidNode);  // in its task's part
  std::map<std::pair<graph::ValueRef, int>, graph::ValueRef> received;  // (value, reading task) -> its Recv
  std::map<std::pair<graph::ValueRef, int>, graph::NodeId> sent;        // (value, reading task) -> its Send
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
        const graph::NodeId sent_by = send.add({.op = "Send",
                                                .inputs = {{copy_of[input.node], input.output}},
                                                .attrs = {{"group", group}, {"peer_task", int64_t{task}}},
                                                .name = producer.name + "/send_" + std::to_string(input.output) +
                                                        "_to_task_" + std::to_string(task)});
        sender.sends.push_back(sent_by);
        sent[{input, task}] = sent_by;
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
    std::vector<graph::NodeId> controls;
    for (graph::NodeId control : copy.control_inputs) {
      const int from = task_of(g.node(control));
      if (from == task) {
        controls.push_back(copy_of[control]);
        continue;
      }
      // Note [Order across tasks]
      const std::vector<graph::NodeId> sends = sends_read_by(g, ops, control, task, sent);
      if (sends.empty()) {
        return graph::invalid_argument("partition_by_task: a control edge from '" + g.node(control).name + "' (task " +
                                       std::to_string(from) + ") to '" + node.name + "' (task " + std::to_string(task) +
                                       "), which reads nothing of task " + std::to_string(task) +
                                       ": tasks exchange values, not order");
      }
      controls.insert(controls.end(), sends.begin(), sends.end());
    }
    copy.control_inputs = std::move(controls);
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
