// place_on_parameter_servers and parameter_server_tasks: CentralStorage over the workers with server
// 0 as its host, the variables spread over the servers, and the result cut by task.
#include "strategies/parameter_server.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "graph/print.h"
#include "ops/optimizer_ops.h"
#include "ops/task_partition.h"
#include "strategies/replicate.h"
#include "strategies/variable_partitioning.h"

namespace mirra::strategies {

namespace {

using graph::NodeId;

graph::DeviceId server_device(int server) { return {graph::DeviceKind::cpu, 0, server}; }

using ops::task_of;

// The trained variables, then every update of one with the state it updates (an optimizer's slots),
// on their servers; then each node of server 0 (the host) that only nodes of one other server read
// (a sum of a variable's gradients, a scaling of it) on that server too.
graph::Status spread_over_servers(TrainingProgram& cluster, int servers) {
  graph::Graph& g = cluster.graph;
  MIRRA_ASSIGN_OR_RETURN(const std::vector<NodeId> order, g.topological_order());
  std::vector<int64_t> bytes;
  std::vector<std::string> whole;  // of a variable's part, the whole variable's name
  for (const auto& [variable, gradient] : cluster.variables_and_gradients) {
    const graph::TensorType& type = g.type(variable);
    bytes.push_back(type.shape.num_elements().value_or(0) * static_cast<int64_t>(graph::dtype_size(type.dtype)));
    const graph::Node& node = g.node(variable.node);
    whole.emplace_back(node.attrs.contains("partition_of") ? stored_variable_name(node) : std::string_view());
  }
  const std::vector<int> assigned = assign_servers(bytes, servers, whole);
  std::vector<int> server_of(g.size(), -1);  // -1: where replicate put it
  for (size_t j = 0; j < assigned.size(); ++j) server_of[cluster.variables_and_gradients[j].first.node] = assigned[j];
  for (const graph::Node& node : g.nodes()) {
    const graph::OpSchema* schema = cluster.ops->find(node.op);
    if (schema == nullptr || schema->updates.empty()) continue;
    int server = -1;
    for (size_t i : schema->updates) {
      if (i < node.inputs.size() && server_of[node.inputs[i].node] >= 0) server = server_of[node.inputs[i].node];
    }
    if (server < 0) continue;
    server_of[node.id] = server;
    for (size_t i : schema->updates) {
      if (i < node.inputs.size()) server_of[node.inputs[i].node] = server;
    }
  }
  std::vector<std::vector<NodeId>> consumers(g.size());
  for (const graph::Node& node : g.nodes()) {
    for (graph::ValueRef input : node.inputs) consumers[input.node].push_back(node.id);
    for (NodeId control : node.control_inputs) consumers[control].push_back(node.id);
  }
  const std::set<NodeId> stay(cluster.step_state.begin(), cluster.step_state.end());
  const graph::DeviceId host = server_device(0);
  const auto where = [&](NodeId id) { return server_of[id] >= 0 ? server_of[id] : task_of(g.node(id)); };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // each node's consumers first
    const NodeId id = *it;
    const graph::Node& node = g.node(id);
    if (server_of[id] >= 0 || node.device != host || node.op == "Variable" || stay.count(id) > 0 || consumers[id].empty()) {
      continue;
    }
    const int server = where(consumers[id].front());
    const bool one_server = server > 0 && server < servers &&
                            std::all_of(consumers[id].begin(), consumers[id].end(), [&](NodeId c) { return where(c) == server; });
    if (one_server) server_of[id] = server;
  }
  for (NodeId id = 0; id < g.size(); ++id) {
    if (server_of[id] >= 0) g.mutable_node(id).device = server_device(server_of[id]);
  }
  return graph::Status();
}

// Each join of a variable's parts (made on server 0 by partition_variables) copied onto every task
// that reads it, so that the parts travel from their servers straight to their readers; the parts'
// updates wait for every copy, and the join itself goes where no node of its own task reads it.
void join_on_reading_tasks(graph::Graph& g, const std::vector<std::string>& joins) {
  for (const std::string& name : joins) {
    const std::optional<NodeId> found = g.find(name);
    if (!found) continue;
    const NodeId join = *found;
    std::map<int, std::vector<NodeId>> readers;  // by task, other than the join's
    bool read_on_its_task = false;
    for (const graph::Node& node : g.nodes()) {
      if (std::none_of(node.inputs.begin(), node.inputs.end(), [&](graph::ValueRef v) { return v.node == join; })) continue;
      if (task_of(node) == task_of(g.node(join))) {
        read_on_its_task = true;
      } else {
        readers[task_of(node)].push_back(node.id);
      }
    }
    std::vector<NodeId> copies;
    for (const auto& [task, nodes] : readers) {
      graph::Node copy = g.node(join);
      copy.name = g.unique_name(name + "/task_" + std::to_string(task));
      copy.device = g.node(nodes.front()).device;
      const NodeId id = g.add_node(std::move(copy));
      copies.push_back(id);
      for (NodeId reader : nodes) {
        for (graph::ValueRef& input : g.mutable_node(reader).inputs) {
          if (input.node == join) input.node = id;
        }
      }
    }
    for (NodeId id = 0; id < g.size(); ++id) {
      std::vector<NodeId>& controls = g.mutable_node(id).control_inputs;
      if (std::find(controls.begin(), controls.end(), join) == controls.end()) continue;
      if (!read_on_its_task) std::erase(controls, join);
      controls.insert(controls.end(), copies.begin(), copies.end());
    }
  }
}

// The signature's values each worker reports: the loss, correct count, metrics and weights.
std::vector<graph::ValueRef> reported_values(const runtime::training::TrainingGraph& signature) {
  std::vector<graph::ValueRef> values = {signature.loss, signature.correct, signature.loss_weight};
  for (const runtime::training::TrainingMetric& metric : signature.metrics) {
    values.push_back(metric.value);
    values.push_back(metric.weight);
  }
  return values;
}

std::string on_task(const std::string& name, int task) { return name + "/on_task_" + std::to_string(task); }

// `value` of the cluster's graph `g` in a part, where a node of its name (`rename` of it) is; invalid elsewhere.
graph::ValueRef in_part(const graph::Graph& part, const graph::Graph& g, graph::ValueRef value,
                        const std::function<std::string(const std::string&)>& rename) {
  if (!value.valid()) return value;
  const auto found = part.find(rename(g.node(value.node).name));
  return found ? graph::ValueRef{*found, value.output} : graph::ValueRef{};
}

// The strategy: one replica per worker task on the config's device, the cluster's shape from its config.
class ParameterServerStrategy final : public Strategy {
 public:
  explicit ParameterServerStrategy(StrategyConfig config) : config_(std::move(config)) {}
  const StrategyConfig& config() const override { return config_; }

 private:
  graph::Expected<TrainingProgram> rewrite(const TrainingProgram& program, const ops::WorkerPart&) const override {
    ParameterServerPlan plan{.servers = config_.cluster.servers, .min_shard_bytes = config_.min_shard_bytes};
    const graph::DeviceId& local = config_.devices.front();
    for (int w = 0; w < config_.cluster.workers; ++w) plan.workers.push_back({local.kind, local.ordinal, config_.cluster.servers + w});
    return place_on_parameter_servers(program, plan);
  }

  StrategyConfig config_;
};

}  // namespace

graph::Expected<std::unique_ptr<Strategy>> make_parameter_server_strategy(StrategyConfig config) {
  if (config.devices.size() != 1) {
    return graph::invalid_argument("parameter_server trains one replica on each worker: give it one device, not " +
                                   std::to_string(config.devices.size()));
  }
  if (config.sync_batch_norm) {
    return graph::invalid_argument("parameter_server does not offer synchronised batch normalisation "
                                   "(training.sync_batch_norm) yet; each worker normalises with its share's statistics");
  }
  if (config.cluster.servers < 1 || config.cluster.workers < 1) {
    return graph::invalid_argument("parameter_server needs at least one server and one worker, not " +
                                   std::to_string(config.cluster.servers) + " and " + std::to_string(config.cluster.workers));
  }
  return std::unique_ptr<Strategy>(new ParameterServerStrategy(std::move(config)));
}

std::vector<int> assign_servers(const std::vector<int64_t>& bytes, int servers, const std::vector<std::string>& whole) {
  std::vector<size_t> largest_first(bytes.size());
  std::iota(largest_first.begin(), largest_first.end(), size_t{0});
  std::stable_sort(largest_first.begin(), largest_first.end(), [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> held(static_cast<size_t>(servers), 0);
  std::map<std::string, std::set<int>> holding;  // by whole variable: the servers that hold a part of it
  std::vector<int> server(bytes.size(), 0);
  for (size_t j : largest_first) {
    const std::set<int>* taken = nullptr;
    if (j < whole.size() && !whole[j].empty()) taken = &holding[whole[j]];
    int least = -1;
    for (int k = 0; k < servers; ++k) {
      const bool free = taken == nullptr || !taken->contains(k) || static_cast<int>(taken->size()) >= servers;
      if (free && (least < 0 || held[static_cast<size_t>(k)] < held[static_cast<size_t>(least)])) least = k;
    }
    server[j] = least;
    held[static_cast<size_t>(least)] += bytes[j];
    if (taken != nullptr) holding[whole[j]].insert(least);
  }
  return server;
}

graph::Expected<TrainingProgram> place_on_parameter_servers(const TrainingProgram& program, const ParameterServerPlan& plan) {
  if (plan.servers < 1) return graph::invalid_argument("parameter_server: no parameter server");
  if (plan.workers.empty()) return graph::invalid_argument("parameter_server: no worker");
  std::set<int> tasks;
  for (const graph::DeviceId& device : plan.workers) {
    if (!device.task || *device.task < plan.servers) {
      return graph::invalid_argument("parameter_server: worker device '" + device.to_string() +
                                     "' must name a worker's task (/task:N/..., N >= " + std::to_string(plan.servers) +
                                     "; tasks below are the servers)");
    }
    if (!tasks.insert(*device.task).second) {
      return graph::invalid_argument("parameter_server: two devices of task " + std::to_string(*device.task) +
                                     "; a worker trains one replica");
    }
  }
  if (program.accumulate_gradients) {
    return graph::invalid_argument("parameter_server: gradient accumulation is not supported yet");
  }
  TrainingProgram partitioned = program;
  MIRRA_ASSIGN_OR_RETURN(const std::vector<std::string> joins,
                         partition_variables(partitioned, {.min_shard_bytes = plan.min_shard_bytes, .max_shards = plan.servers}));
  ReplicationPlan replication{.devices = plan.workers, .host = server_device(0), .mirror_state = false};
  replication.replicas_feed_their_batches = true;
  MIRRA_ASSIGN_OR_RETURN(TrainingProgram cluster, replicate(partitioned, replication));
  MIRRA_RETURN_IF_ERROR(spread_over_servers(cluster, plan.servers));
  join_on_reading_tasks(cluster.graph, joins);
  return cluster;
}

graph::Expected<std::map<int, TaskProgram>> parameter_server_tasks(const TrainingProgram& cluster,
                                                                   const ops::CollectiveOptions& transfers) {
  graph::Graph g = cluster.graph;
  graph::Builder b(g, *cluster.ops);
  // The train target becomes one per task, each over that task's updates.
  const NodeId train = cluster.signature.train;
  const int train_task = task_of(g.node(train));
  std::map<int, std::vector<NodeId>> updates;
  for (NodeId control : g.node(train).control_inputs) updates[task_of(g.node(control))].push_back(control);
  g.mutable_node(train).control_inputs = updates[train_task];
  std::map<int, std::string> train_names = {{train_task, g.node(train).name}};
  for (const auto& [task, controls] : updates) {
    if (task == train_task) continue;
    b.set_device(g.node(controls.front()).device);
    train_names[task] = g.node(ops::no_op(b, g.node(train).name + "/task_" + std::to_string(task), controls)).name;
  }
  // Each worker (a task whose replica feeds a batch input) receives the values the signature reports.
  std::map<int, graph::DeviceId> workers;
  for (const graph::Node& node : cluster.graph.nodes()) {
    int replica = -1;
    replica_free_name(node.name, &replica);
    if (node.op == "Placeholder" && replica >= 0 && node.device) workers.emplace(task_of(node), *node.device);
  }
  for (const auto& [task, device] : workers) {
    b.set_device(device);
    for (graph::ValueRef value : reported_values(cluster.signature)) {
      if (value.valid()) b.add({.op = "Identity", .inputs = {value}, .name = on_task(g.node(value.node).name, task)});
    }
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  using TaskGraphs = std::map<int, ops::TaskGraph>;
  MIRRA_ASSIGN_OR_RETURN(TaskGraphs parts, ops::partition_by_task(g, *cluster.ops));
  std::map<int, TaskProgram> tasks;
  for (auto& [task, part] : parts) {
    TaskProgram& program = tasks[task];
    // A worker's batch inputs, replica_<r>/<name> in the cluster, by their own names.
    for (graph::Node node : part.graph.nodes()) {
      int replica = -1;
      const std::string_view name = replica_free_name(node.name, &replica);
      if (node.op == "Placeholder" && replica >= 0) node.name = std::string(name);
      if (node.op == "Send" || node.op == "Recv") {
        node.attrs.set("implementation", transfers.implementation);
        node.attrs.set("timeout_ms", transfers.timeout_ms);
      }
      program.graph.add_node(std::move(node));
    }
    std::vector<NodeId> step = part.sends;
    for (const graph::Node& node : program.graph.nodes()) {
      if (node.op == "Recv") step.push_back(node.id);
    }
    if (const auto found = train_names.find(task); found != train_names.end()) step.push_back(*program.graph.find(found->second));
    graph::Builder in_part_builder(program.graph, *cluster.ops);
    runtime::training::TrainingGraph& signature = program.signature;
    signature.train = ops::no_op(in_part_builder, "parameter_server_step", step);
    MIRRA_RETURN_IF_ERROR(in_part_builder.status());
    const bool worker = workers.contains(task);
    if (!worker && task != train_task) continue;
    const int this_task = task;  // a lambda may not capture a structured binding (clang 14)
    const auto rename = [&](const std::string& name) { return worker ? on_task(name, this_task) : name; };
    const runtime::training::TrainingGraph& whole = cluster.signature;
    signature.features = whole.features;
    signature.labels = whole.labels;
    signature.batch_inputs = whole.batch_inputs;
    signature.loss = in_part(program.graph, g, whole.loss, rename);
    signature.correct = in_part(program.graph, g, whole.correct, rename);
    signature.loss_weight = in_part(program.graph, g, whole.loss_weight, rename);
    for (runtime::training::TrainingMetric metric : whole.metrics) {
      metric.value = in_part(program.graph, g, metric.value, rename);
      metric.weight = in_part(program.graph, g, metric.weight, rename);
      signature.metrics.push_back(std::move(metric));
    }
  }
  return tasks;
}

std::string program_fingerprint(const graph::Graph& cluster) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : graph::to_text(cluster)) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace mirra::strategies
