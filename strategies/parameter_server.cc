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
#include "strategies/pruning.h"
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
  const std::vector<std::vector<NodeId>> consumers = g.consumers();
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

// Each lookup of a variable's rows (a GatherV2 along axis 0 of a variable a server holds, or of a
// read of one) onto that server, then each scatter of rows into a gradient (an UnsortedSegmentSum
// that only one server's nodes read: a lookup's gradient, summed or applied there) too: a worker then
// sends the indices and its gradient's rows and receives the rows it looks up, not the whole variable
// and its whole gradient (TensorFlow's embedding lookup placed with its table, and its IndexedSlices).
void put_lookups_on_servers(graph::Graph& g, int servers) {
  const auto server = [&](NodeId id) { return task_of(g.node(id)) < servers ? task_of(g.node(id)) : -1; };
  for (NodeId id = 0; id < g.size(); ++id) {
    const graph::Node& node = g.node(id);
    if (node.op != "GatherV2" || graph::checked_attr<int64_t>(node, "axis") != 0 || graph::checked_attr<int64_t>(node, "batch_dims") != 0) {
      continue;
    }
    NodeId table = node.inputs[0].node;
    if (g.node(table).op == "Identity" && g.node(g.node(table).inputs[0].node).op == "Variable") table = g.node(table).inputs[0].node;
    if (g.node(table).op == "Variable" && server(table) >= 0) g.mutable_node(id).device = g.node(table).device;
  }
  const std::vector<std::vector<NodeId>> consumers = g.consumers();
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).op != "UnsortedSegmentSum" || server(id) >= 0 || consumers[id].empty()) continue;
    const NodeId first = consumers[id].front();
    const bool one_server = server(first) >= 0 && std::all_of(consumers[id].begin(), consumers[id].end(),
                                                              [&](NodeId c) { return server(c) == server(first); });
    if (one_server) g.mutable_node(id).device = g.node(first).device;
  }
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

std::string copy_name(size_t worker, const std::string& name) { return "replica_" + std::to_string(worker) + "/" + name; }

// Asynchronous training's placement of the variables: the trained ones by size (assign_servers), the
// state an update writes with a trained variable on that variable's server, the rest on server 0.
std::vector<int> asynchronous_servers(const TrainingProgram& program, int servers) {
  const graph::Graph& g = program.graph;
  std::vector<int64_t> bytes;
  std::vector<std::string> whole;
  std::vector<bool> trained(g.size(), false);
  for (const auto& [variable, gradient] : program.variables_and_gradients) {
    const graph::TensorType& type = g.type(variable);
    bytes.push_back(type.shape.num_elements().value_or(0) * static_cast<int64_t>(graph::dtype_size(type.dtype)));
    const graph::Node& node = g.node(variable.node);
    whole.emplace_back(node.attrs.contains("partition_of") ? stored_variable_name(node) : std::string_view());
    trained[variable.node] = true;
  }
  const std::vector<int> assigned = assign_servers(bytes, servers, whole);
  std::vector<int> server_of(g.size(), 0);
  for (size_t j = 0; j < assigned.size(); ++j) server_of[program.variables_and_gradients[j].first.node] = assigned[j];
  for (const graph::Node& node : g.nodes()) {
    const graph::OpSchema* schema = program.ops->find(node.op);
    if (schema == nullptr) continue;
    for (size_t i : schema->updates) {
      if (i >= node.inputs.size() || !trained[node.inputs[i].node]) continue;
      for (size_t k : schema->updates) {
        if (k < node.inputs.size() && !trained[node.inputs[k].node]) server_of[node.inputs[k].node] = server_of[node.inputs[i].node];
      }
    }
  }
  return server_of;
}

// The asynchronous cluster: every Variable once, on its server; every other node once per worker w
// as replica_<w>/<name>, on w's device, but an update (a node that writes a variable) on its
// variable's server. A copy reads a variable through its own read (an Identity on the variable's
// server, replica_<w>/<variable>/read), so that every value crossing tasks belongs to one copy; an
// update writes the variable itself. The signature is worker 0's copy's, its train a NoOp over
// every copy's train.
graph::Expected<TrainingProgram> place_asynchronously(const TrainingProgram& program, const ParameterServerPlan& plan) {
  const graph::Graph& one = program.graph;
  const std::vector<int> server_of = asynchronous_servers(program, plan.servers);
  TrainingProgram cluster;
  cluster.ops = program.ops;
  graph::Graph& g = cluster.graph;
  graph::Builder b(g, *program.ops);
  MIRRA_ASSIGN_OR_RETURN(const std::vector<NodeId> order, one.topological_order());
  const size_t workers = plan.workers.size();
  std::vector<NodeId> shared(one.size(), graph::kInvalidNode);  // a variable's one node
  std::vector<std::vector<NodeId>> copies(workers, std::vector<NodeId>(one.size(), graph::kInvalidNode));
  std::map<std::pair<size_t, NodeId>, graph::ValueRef> reads;  // by worker and variable (of `one`)
  const auto read = [&](size_t w, graph::ValueRef variable) {
    auto [found, inserted] = reads.try_emplace({w, variable.node});
    if (inserted) {
      b.set_device(server_device(server_of[variable.node]));
      found->second = b.add_value({.op = "Identity",
                                   .inputs = {{shared[variable.node], variable.output}},
                                   .name = copy_name(w, one.node(variable.node).name + "/read")});
    }
    return found->second;
  };
  for (NodeId id : order) {
    const graph::Node& node = one.node(id);
    if (node.op == "Variable") {
      graph::Node variable = node;
      variable.device = server_device(server_of[id]);
      shared[id] = g.add_node(std::move(variable));
      continue;
    }
    const graph::OpSchema* schema = program.ops->find(node.op);
    const std::vector<size_t> no_updates;
    const std::vector<size_t>& updates = schema != nullptr ? schema->updates : no_updates;
    const auto updated = [&](size_t i) { return std::find(updates.begin(), updates.end(), i) != updates.end(); };
    std::optional<int> server;  // an update's: its variables'
    for (size_t i : updates) {
      if (i < node.inputs.size() && shared[node.inputs[i].node] != graph::kInvalidNode) server = server_of[node.inputs[i].node];
    }
    for (size_t w = 0; w < workers; ++w) {
      graph::Node copy = node;
      copy.name = copy_name(w, node.name);
      copy.device = server ? server_device(*server) : plan.workers[w];
      for (size_t i = 0; i < copy.inputs.size(); ++i) {
        const graph::ValueRef input = node.inputs[i];
        if (shared[input.node] == graph::kInvalidNode) {
          copy.inputs[i].node = copies[w][input.node];
        } else {
          copy.inputs[i] = updated(i) ? graph::ValueRef{shared[input.node], input.output} : read(w, input);
        }
      }
      for (NodeId& control : copy.control_inputs) {
        control = shared[control] != graph::kInvalidNode ? shared[control] : copies[w][control];
      }
      copies[w][id] = g.add_node(std::move(copy));
    }
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  const auto in_copy = [&](graph::ValueRef value, size_t w) {
    if (!value.valid()) return value;
    return graph::ValueRef{shared[value.node] != graph::kInvalidNode ? shared[value.node] : copies[w][value.node], value.output};
  };
  runtime::training::TrainingGraph& signature = cluster.signature;
  signature = program.signature;
  signature.loss = in_copy(signature.loss, 0);
  signature.correct = in_copy(signature.correct, 0);
  signature.loss_weight = in_copy(signature.loss_weight, 0);
  signature.learning_rate = in_copy(signature.learning_rate, 0);
  for (runtime::training::TrainingMetric& metric : signature.metrics) {
    metric.value = in_copy(metric.value, 0);
    metric.weight = in_copy(metric.weight, 0);
  }
  signature.inference.reset();
  signature.synchronize = graph::kInvalidNode;
  for (size_t w = 1; w < workers; ++w) {
    for (graph::ValueRef value : reported_values(program.signature)) {
      if (value.valid()) cluster.reported.push_back(in_copy(value, w));
    }
  }
  std::vector<NodeId> trains;
  for (size_t w = 0; w < workers; ++w) trains.push_back(copies[w][program.signature.train]);
  b.set_device(server_device(0));
  signature.train = ops::no_op(b, one.node(program.signature.train).name, trains);
  MIRRA_RETURN_IF_ERROR(b.status());
  for (const auto& [variable, gradient] : program.variables_and_gradients) {
    cluster.variables_and_gradients.emplace_back(in_copy(variable, 0), in_copy(gradient, 0));
  }
  for (NodeId state : program.step_state) {
    if (shared[state] != graph::kInvalidNode) cluster.step_state.push_back(shared[state]);
  }
  return cluster;
}

// The strategy: one replica per worker task on the config's device, the cluster's shape from its config.
class ParameterServerStrategy final : public Strategy {
 public:
  explicit ParameterServerStrategy(StrategyConfig config) : config_(std::move(config)) {}
  const StrategyConfig& config() const override { return config_; }

 private:
  graph::Expected<TrainingProgram> rewrite(const TrainingProgram& program, const ops::WorkerPart&) const override {
    ParameterServerPlan plan{.servers = config_.cluster.servers,
                             .min_shard_bytes = config_.min_shard_bytes,
                             .mode = {.asynchronous = config_.asynchronous, .staleness = config_.staleness}};
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
  if (plan.mode.asynchronous) {
    if (plan.mode.staleness > 0) return graph::invalid_argument("parameter_server: a staleness bound is synchronous training's");
    MIRRA_ASSIGN_OR_RETURN(TrainingProgram cluster, place_asynchronously(partitioned, plan));
    if (plan.lookups_on_servers) put_lookups_on_servers(cluster.graph, plan.servers);
    return cluster;
  }
  ReplicationPlan replication{.devices = plan.workers, .host = server_device(0), .mirror_state = false};
  replication.replicas_feed_their_batches = true;
  replication.report_each_replica = plan.mode.staleness > 0;
  MIRRA_ASSIGN_OR_RETURN(TrainingProgram cluster, replicate(partitioned, replication));
  MIRRA_RETURN_IF_ERROR(spread_over_servers(cluster, plan.servers));
  // With staleness a worker's step must not wait for its servers' step: its lookups stay its own.
  if (plan.lookups_on_servers && plan.mode.staleness == 0) put_lookups_on_servers(cluster.graph, plan.servers);
  join_on_reading_tasks(cluster.graph, joins);
  return cluster;
}

namespace {

// A task's signature: `whole`'s batch inputs, and its loss, correct count and metrics where a node
// named `rename` of theirs is in `part`.
void report_in_part(runtime::training::TrainingGraph& signature, const graph::Graph& part, const graph::Graph& g,
                    const runtime::training::TrainingGraph& whole, const std::function<std::string(const std::string&)>& rename) {
  signature.features = whole.features;
  signature.labels = whole.labels;
  signature.batch_inputs = whole.batch_inputs;
  signature.loss = in_part(part, g, whole.loss, rename);
  signature.correct = in_part(part, g, whole.correct, rename);
  signature.loss_weight = in_part(part, g, whole.loss_weight, rename);
  for (runtime::training::TrainingMetric metric : whole.metrics) {
    metric.value = in_part(part, g, metric.value, rename);
    metric.weight = in_part(part, g, metric.weight, rename);
    signature.metrics.push_back(std::move(metric));
  }
}

// `g` cut by task (ops::partition_by_task): each part's Sends and Recvs call `transfers`' implementation
// with its deadline, and a worker's batch inputs (replica_<r>/<name> in the cluster) take their names
// in the one-replica program. Nodes keep their ids within their part.
graph::Expected<std::map<int, ops::TaskGraph>> cut_by_task(const graph::Graph& g, const graph::OpRegistry& ops,
                                                           const ops::CollectiveOptions& transfers) {
  using TaskGraphs = std::map<int, ops::TaskGraph>;
  MIRRA_ASSIGN_OR_RETURN(TaskGraphs parts, ops::partition_by_task(g, ops));
  TaskGraphs cut;
  for (auto& [task, part] : parts) {
    ops::TaskGraph& named = cut[task];
    named.sends = part.sends;
    for (graph::Node node : part.graph.nodes()) {
      int replica = -1;
      const std::string_view name = replica_free_name(node.name, &replica);
      if (node.op == "Placeholder" && replica >= 0) node.name = std::string(name);
      if (node.op == "Send" || node.op == "Recv") {
        node.attrs.set("implementation", transfers.implementation);
        node.attrs.set("timeout_ms", transfers.timeout_ms);
      }
      named.graph.add_node(std::move(node));
    }
  }
  return cut;
}

// A target of `part` named `name`: a NoOp over `nodes`; invalid for none.
graph::Expected<NodeId> add_target(graph::Graph& part, const std::string& name, const std::vector<NodeId>& nodes,
                                   const graph::OpRegistry& ops) {
  if (nodes.empty()) return graph::kInvalidNode;
  graph::Builder b(part, ops);
  const NodeId added = ops::no_op(b, name, nodes);
  MIRRA_RETURN_IF_ERROR(b.status());
  return added;
}

// A task's step target, "parameter_server_step": its Sends, its Recvs and the node named `train`
// (its part of the train target) when it has one.
graph::Expected<NodeId> add_step(graph::Graph& part, const std::vector<NodeId>& sends, const std::string& train,
                                 const graph::OpRegistry& ops) {
  std::vector<NodeId> step = sends;
  for (const graph::Node& node : part.nodes()) {
    if (node.op == "Recv") step.push_back(node.id);
  }
  if (const auto found = part.find(train)) step.push_back(*found);
  return add_target(part, "parameter_server_step", step, ops);
}

// Whether `send` of `part` sends a value computed from what the part receives in the same step.
bool sends_what_it_receives(const graph::Graph& part, NodeId send) {
  const std::vector<bool> needed = part.needed_for(std::vector<NodeId>{send});
  for (NodeId id = 0; id < part.size(); ++id) {
    if (needed[id] && part.node(id).op == "Recv") return true;
  }
  return false;
}

// A server's pulls among its Sends: those to a worker task (of `workers`) of a value its step has
// before it receives anything (a variable, or a part of one).
std::vector<NodeId> pulls_to_workers(const graph::Graph& part, const std::vector<NodeId>& sends,
                                     const std::map<int, graph::DeviceId>& workers) {
  std::vector<NodeId> pulls;
  for (NodeId send : sends) {
    const int peer = static_cast<int>(graph::checked_attr<int64_t>(part.node(send), "peer_task"));
    if (workers.contains(peer) && !sends_what_it_receives(part, send)) pulls.push_back(send);
  }
  return pulls;
}

// The Recvs of `part` of the transfer groups `groups`.
std::vector<NodeId> receives_of(const graph::Graph& part, const std::set<std::string>& groups) {
  std::vector<NodeId> recvs;
  for (const graph::Node& node : part.nodes()) {
    if (node.op == "Recv" && groups.contains(graph::checked_attr<std::string>(node, "group"))) recvs.push_back(node.id);
  }
  return recvs;
}

// Splits the control inputs of `train` by task: it keeps those of its own task, and each other
// task's become a NoOp there, "<train>/task_<t>". The names of those, by task.
std::map<int, std::string> split_by_task(graph::Graph& g, graph::Builder& b, NodeId train) {
  std::map<int, std::vector<NodeId>> by_task;
  for (NodeId control : g.node(train).control_inputs) by_task[task_of(g.node(control))].push_back(control);
  const int own = task_of(g.node(train));
  g.mutable_node(train).control_inputs = by_task[own];
  std::map<int, std::string> names = {{own, g.node(train).name}};
  for (const auto& [task, controls] : by_task) {
    if (task == own) continue;
    b.set_device(g.node(controls.front()).device);
    names[task] = g.node(ops::no_op(b, g.node(train).name + "/task_" + std::to_string(task), controls)).name;
  }
  return names;
}

// The copy (worker index) a node of the asynchronous cluster belongs to, by its name; -1 for none.
int copy_of(std::string_view name) {
  int replica = -1;
  replica_free_name(name, &replica);
  return replica;
}

// The worker copy a transfer of an asynchronous server moves a value of: its Send's input's, or its
// Recv's producer's (named by its group, "<producer>:<output>->task_<t>").
int copy_of_transfer(const graph::Graph& part, const graph::Node& transfer) {
  if (transfer.op == "Send") return copy_of(part.node(transfer.inputs.front().node).name);
  const std::string& group = graph::checked_attr<std::string>(transfer, "group");
  return copy_of(std::string_view(group).substr(0, group.rfind(':')));
}

// An asynchronous server's loops over its part `part`: each worker's transfers and updates. A control
// input from a Send is dropped (the loop's runs order its Sends before its updates); the Recvs a Send
// needs are received before the loop pulls (a Recv of another worker's copy is an error naming both).
graph::Expected<std::vector<WorkerLoop>> worker_loops(graph::Graph& part, const std::map<int, int>& worker_tasks,
                                                      const std::map<int, std::string>& applies) {
  for (NodeId id = 0; id < part.size(); ++id) {
    std::vector<NodeId>& controls = part.mutable_node(id).control_inputs;
    std::erase_if(controls, [&](NodeId control) { return part.node(control).op == "Send"; });
  }
  std::map<int, WorkerLoop> loops;
  for (const auto& [w, task] : worker_tasks) loops[w].worker_task = task;
  for (const graph::Node& node : part.nodes()) {
    if (node.op != "Send" && node.op != "Recv") continue;
    const int w = copy_of_transfer(part, node);
    if (!loops.contains(w)) {
      return graph::internal_error("asynchronous server: transfer '" + node.name + "' belongs to no worker's copy");
    }
    WorkerLoop& loop = loops[w];
    if (node.op == "Recv") {
      loop.recvs.push_back(node.id);
      continue;
    }
    const std::vector<bool> needed = part.needed_for(std::vector<NodeId>{node.id});
    for (NodeId id = 0; id < part.size(); ++id) {
      if (!needed[id] || part.node(id).op != "Recv" || std::count(loop.pull_recvs.begin(), loop.pull_recvs.end(), id) > 0) continue;
      if (copy_of_transfer(part, part.node(id)) != w) {
        return graph::internal_error("asynchronous server: the send '" + node.name + "' needs '" + part.node(id).name +
                                     "' of another worker's copy");
      }
      loop.pull_recvs.push_back(id);
    }
    loop.sends.push_back(node.id);
    loop.pulled.push_back(node.inputs.front());
  }
  std::vector<WorkerLoop> result;
  for (auto& [w, loop] : loops) {
    const std::vector<NodeId>& first = loop.pull_recvs;  // a lambda may not capture a structured binding (clang 14)
    std::erase_if(loop.recvs, [&](NodeId recv) { return std::count(first.begin(), first.end(), recv) > 0; });
    if (const auto apply = applies.find(w); apply != applies.end()) {
      if (const auto found = part.find(apply->second)) loop.apply = *found;
    }
    result.push_back(std::move(loop));
  }
  return result;
}

graph::Expected<std::map<int, TaskProgram>> asynchronous_tasks(const TrainingProgram& cluster,
                                                               const ops::CollectiveOptions& transfers) {
  graph::Graph g = cluster.graph;
  graph::Builder b(g, *cluster.ops);
  // Each copy's train becomes one per task; the train over every copy's holds nothing then.
  std::map<int, int> worker_tasks;                     // copy -> its worker's task
  std::map<int, std::map<int, std::string>> applies;   // task -> copy -> its part of the copy's train
  const std::vector<NodeId> trains = g.node(cluster.signature.train).control_inputs;
  g.mutable_node(cluster.signature.train).control_inputs.clear();
  for (NodeId train : trains) {
    const int w = copy_of(g.node(train).name);
    worker_tasks[w] = task_of(g.node(train));
    for (const auto& [task, name] : split_by_task(g, b, train)) applies[task][w] = name;
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  using TaskGraphs = std::map<int, ops::TaskGraph>;
  MIRRA_ASSIGN_OR_RETURN(TaskGraphs parts, cut_by_task(g, *cluster.ops, transfers));
  std::map<int, TaskProgram> tasks;
  for (auto& [task, part] : parts) {
    TaskProgram& program = tasks[task];
    program.graph = std::move(part.graph);
    const int this_task = task;  // a lambda may not capture a structured binding (clang 14)
    const auto worker =
        std::find_if(worker_tasks.begin(), worker_tasks.end(), [&](const auto& entry) { return entry.second == this_task; });
    if (worker == worker_tasks.end()) {
      MIRRA_ASSIGN_OR_RETURN(program.loops, worker_loops(program.graph, worker_tasks, applies[task]));
      continue;
    }
    // A worker: its step is its Sends, its Recvs and its copy's train; its signature its copy's.
    const int w = worker->first;
    MIRRA_ASSIGN_OR_RETURN(program.signature.train, add_step(program.graph, part.sends, applies[task][w], *cluster.ops));
    const std::string copy_0 = "replica_0/", own = "replica_" + std::to_string(w) + "/";
    const auto rename = [&](const std::string& name) { return name.starts_with(copy_0) ? own + name.substr(copy_0.size()) : name; };
    report_in_part(program.signature, program.graph, g, cluster.signature, rename);
  }
  return tasks;
}

}  // namespace

graph::Expected<std::map<int, TaskProgram>> parameter_server_tasks(const TrainingProgram& program,
                                                                   const ops::CollectiveOptions& transfers,
                                                                   const ParameterServerMode& mode) {
  // Only what the steps run: every value crossing between tasks does so each step, and a gradient
  // the program lists but no update reads (an embedding table's, updated by rows) must not.
  TrainingProgram cluster = program;
  for (auto& [variable, gradient] : cluster.variables_and_gradients) gradient = {};
  prune(cluster);
  if (mode.asynchronous) return asynchronous_tasks(cluster, transfers);
  graph::Graph g = cluster.graph;
  graph::Builder b(g, *cluster.ops);
  // The train target becomes one per task, each over that task's updates.
  const NodeId train = cluster.signature.train;
  const int train_task = task_of(g.node(train));
  const std::map<int, std::string> train_names = split_by_task(g, b, train);
  // The workers: each task whose replica feeds a batch input, with its device and its replica.
  std::map<int, graph::DeviceId> workers;
  std::map<int, int> replicas;
  for (const graph::Node& node : cluster.graph.nodes()) {
    int replica = -1;
    replica_free_name(node.name, &replica);
    if (node.op != "Placeholder" || replica < 0 || !node.device) continue;
    workers.emplace(task_of(node), *node.device);
    replicas.emplace(task_of(node), replica);
  }
  if (mode.staleness == 0) {  // each worker receives the values the signature reports (with staleness it reports its own)
    for (const auto& [task, device] : workers) {
      b.set_device(device);
      for (graph::ValueRef value : reported_values(cluster.signature)) {
        if (value.valid()) b.add({.op = "Identity", .inputs = {value}, .name = on_task(g.node(value.node).name, task)});
      }
    }
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  using TaskGraphs = std::map<int, ops::TaskGraph>;
  MIRRA_ASSIGN_OR_RETURN(TaskGraphs parts, cut_by_task(g, *cluster.ops, transfers));
  std::map<int, TaskProgram> tasks;
  std::set<std::string> pulled;  // with staleness: the groups of the servers' pulls
  for (auto& [task, part] : parts) {
    TaskProgram& program = tasks[task];
    program.graph = std::move(part.graph);
    const auto train_name = train_names.find(task);
    MIRRA_ASSIGN_OR_RETURN(program.signature.train, add_step(program.graph, part.sends,
                                                             train_name != train_names.end() ? train_name->second : "", *cluster.ops));
    if (mode.staleness > 0 && !workers.contains(task)) {
      const std::vector<NodeId> pulls = pulls_to_workers(program.graph, part.sends, workers);
      for (NodeId send : pulls) pulled.insert(graph::checked_attr<std::string>(program.graph.node(send), "group"));
      MIRRA_ASSIGN_OR_RETURN(program.pulls, add_target(program.graph, "parameter_server_pulls", pulls, *cluster.ops));
    }
    const auto worker = replicas.find(task);
    if (worker == replicas.end() && task != train_task) continue;
    const int this_task = task, replica = worker != replicas.end() ? worker->second : -1;  // no structured binding in a lambda (clang 14)
    const auto rename = [&](const std::string& name) {
      if (replica < 0) return name;
      return mode.staleness > 0 ? replica_report_name(name, replica) : on_task(name, this_task);
    };
    report_in_part(program.signature, program.graph, g, cluster.signature, rename);
  }
  for (const auto& [task, device] : workers) {
    if (mode.staleness == 0) continue;
    graph::Graph& part = tasks.at(task).graph;
    MIRRA_ASSIGN_OR_RETURN(tasks.at(task).pulls, add_target(part, "parameter_server_pulls", receives_of(part, pulled), *cluster.ops));
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
