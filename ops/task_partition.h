// partition_by_task: a graph whose nodes name devices of several tasks (`/task:1/cpu:0`, TensorFlow's
// job/task naming) cut into one graph per task, each of which one session of that task runs. A value
// that one task produces and another reads crosses as a Send in the producer's graph and a Recv in the
// reader's (once per value and reading task), both naming one transfer group, the Send on the
// producer's device and the Recv on the first reader's; they move host memory, and placement copies
// the value from and to a device of its own. Sessions
// that share a Communicator offering send and receive (in process: InProcessCommunicator) then run
// the parts as the whole graph would run. Nodes without a task belong to task 0; nodes keep their
// names, so a task's fetches are found by name in its part.
//
//   auto parts = ops::partition_by_task(graph);
//   // task t: Session session(parts->at(t).graph, kernels(), {.task = t, .communicators = {shared}});
//   //         (across processes: the workers' communicator, given transfer_groups(*parts) first)
//   //         session.run(feeds, fetches, parts->at(t).sends);  // its Sends as targets
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace mirra::ops {

// The task whose device the node names; 0 for a node without a task.
int task_of(const graph::Node& node);

struct TaskGraph {
  graph::Graph graph;
  std::vector<graph::NodeId> sends;  // the part's Send nodes: targets of every run that feeds a Recv elsewhere
};

// A control edge from a node of another task orders the node after the Sends of the values that
// node read from its task (Note [Order across tasks]: a variable's readers before its update).
// Refused, naming them: a control edge from a node of another task that reads nothing of this one
// (tasks exchange values, not order); a cycle.
graph::Expected<std::map<int, TaskGraph>> partition_by_task(const graph::Graph& g, const graph::OpRegistry& ops);

// Every transfer group of `parts`, sorted: what each worker prepares, in the same order everywhere,
// when the tasks are processes (WorkerCommunicator::prepare).
std::vector<std::string> transfer_groups(const std::map<int, TaskGraph>& parts);

}  // namespace mirra::ops
