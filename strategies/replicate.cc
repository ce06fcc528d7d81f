// replicate: node classification, cloning, input splits, batch shares, gradient aggregation, metrics.
#include "strategies/replicate.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/verify.h"
#include "ops/ops.h"
#include "strategies/batch_mean_loss.h"
#include "strategies/collective_order.h"
#include "strategies/sharded_updates.h"

namespace mirra::strategies {

namespace {

using graph::Node;
using graph::NodeId;
using graph::ValueRef;

constexpr int kHost = -1;  // replica_of_ for nodes that exist once

// Which nodes of the one-replica graph are cloned per replica.
struct Classification {
  std::vector<bool> batch_input;  // placeholders whose dim 0 is the batch
  std::vector<bool> from_batch;   // nodes that depend on a batch input (or on the gradients' seed)
  std::vector<bool> replicated;
  // Computed from state and aggregated gradients alone, so every replica's copy holds the same value
  // (loss scaling's "the gradients are finite", say): a node that exists once may read replica 0's.
  std::vector<bool> uniform;
};

Classification classify(const TrainingProgram& program, const std::vector<NodeId>& order, bool mirror_state) {
  const graph::Graph& g = program.graph;
  Classification c{std::vector<bool>(g.size(), false), std::vector<bool>(g.size(), false),
                   std::vector<bool>(g.size(), false), std::vector<bool>(g.size(), false)};
  std::vector<bool>& from_batch = c.from_batch;
  std::vector<bool> step_state(g.size(), false), after_gradient(g.size(), false);
  for (NodeId id : program.step_state) step_state[id] = true;
  std::set<ValueRef> gradients;
  for (const auto& [variable, gradient] : program.variables_and_gradients) gradients.insert(gradient);
  for (NodeId id : order) {
    const Node& node = g.node(id);
    if (node.op == "Placeholder") {
      const graph::Shape& shape = node.outputs[0].shape;
      c.batch_input[id] = from_batch[id] = shape.rank() > 0 && shape.dim(0) < 0;
      c.uniform[id] = !c.batch_input[id];
      continue;
    }
    c.uniform[id] = true;
    for (ValueRef input : node.inputs) {
      from_batch[id] = from_batch[id] || from_batch[input.node];
      after_gradient[id] = after_gradient[id] || after_gradient[input.node] || gradients.count(input) > 0;
      c.uniform[id] = c.uniform[id] && (gradients.count(input) > 0 || c.uniform[input.node]);
    }
    if (ValueRef{id, 0} == program.loss_gradient) {
      // Each replica's seed becomes its share of the batch (Note [Batch shares]).
      from_batch[id] = true;
      c.uniform[id] = false;
    }
    if (step_state[id] || id == program.signature.train) continue;
    c.replicated[id] = mirror_state || (from_batch[id] && !after_gradient[id]);
  }
  return c;
}

class Rewriter {
 public:
  Rewriter(const TrainingProgram& program, const ReplicationPlan& plan, graph::Graph& out)
      : program_(program), plan_(plan), replicas_(static_cast<int>(plan.devices.size())), out_(out),
        b_(out, *program.ops) {}

  graph::Expected<TrainingProgram> run();

 private:
  graph::Status clone_nodes(const std::vector<NodeId>& order, const Classification& c);
  ValueRef map_input(ValueRef value, int replica, NodeId consumer);
  std::vector<NodeId> map_control(NodeId producer, int replica) const;
  ValueRef copy_on(ValueRef value, int replica) const;
  NodeId add_copy(const Node& node, std::string name, int replica, std::vector<ValueRef> inputs,
                  std::vector<NodeId> control_inputs);
  void place(ValueRef value, int replica);
  ValueRef on(int replica, ValueRef value);
  void scale_loss_gradients(NodeId copies_end);
  std::vector<std::vector<ValueRef>> replica_gradients();
  ValueRef accumulated(ValueRef value, int replica, const std::string& scope, const std::string& name);
  std::vector<size_t> ready_order(const std::vector<NodeId>& order) const;
  std::vector<int64_t> variable_bytes() const;
  std::vector<std::vector<ValueRef>> aggregate(const std::vector<std::vector<ValueRef>>& scaled,
                                               const std::vector<NodeId>& order);
  std::vector<ValueRef> reduce_bucket(const std::vector<ValueRef>& values, size_t k, const std::string& group,
                                      CollectiveOrder& order);
  void run_on_leader(ValueRef collective, int leader);
  graph::Expected<std::vector<ShardedVariable>> shardable(const std::vector<std::vector<ValueRef>>& raw,
                                                          NodeId copies_end) const;
  void rewire(const std::vector<std::vector<ValueRef>>& raw, const std::vector<std::vector<ValueRef>>& aggregated,
              NodeId copies_end);
  ValueRef element_count(ValueRef value, int replica);
  graph::Status add_metrics(TrainingProgram& result, NodeId batch_mean, const Classification& c);
  // Where `node`, an update, takes its gradient (its schema's update_gradient); nullopt for any other.
  std::optional<size_t> update_gradient(const Node& node) const {
    const graph::OpSchema* schema = program_.ops->find(node.op);
    return schema != nullptr ? schema->update_gradient : std::nullopt;
  }

  const TrainingProgram& program_;
  const ReplicationPlan& plan_;
  const int replicas_;
  graph::Graph& out_;
  graph::Builder b_;
  std::vector<std::vector<NodeId>> copies_;             // per original node: one per replica, or one
  std::map<NodeId, std::vector<ValueRef>> shares_;      // per batch placeholder: its split
  std::vector<int> replica_of_;                         // per new node
  std::vector<bool> uniform_;                           // per original node: Classification::uniform
  ValueRef global_batch_;                               // B, in the loss's dtype, on the host
  ValueRef examples_;                                   // B, or with accumulation the examples since the last update
  std::vector<NodeId> accumulations_, clears_;          // with accumulation: the accumulate target's, the train target's
  graph::Status error_;
};

NodeId Rewriter::add_copy(const Node& node, std::string name, int replica, std::vector<ValueRef> inputs,
                          std::vector<NodeId> control_inputs) {
  Node copy = node;
  copy.name = std::move(name);
  copy.inputs = std::move(inputs);
  copy.control_inputs = std::move(control_inputs);
  copy.device = replica == kHost ? plan_.host : plan_.devices[static_cast<size_t>(replica)];
  const NodeId id = out_.add_node(std::move(copy));
  replica_of_.resize(out_.size(), kHost);
  replica_of_[id] = replica;
  return id;
}

ValueRef Rewriter::map_input(ValueRef value, int replica, NodeId consumer) {
  if (auto split = shares_.find(value.node); split != shares_.end() && replica != kHost) {
    return split->second[static_cast<size_t>(replica)];
  }
  const std::vector<NodeId>& copies = copies_[value.node];
  if (copies.size() == 1) return {copies[0], value.output};
  if (replica != kHost) return {copies[static_cast<size_t>(replica)], value.output};
  for (const auto& [variable, gradient] : program_.variables_and_gradients) {
    if (gradient == value) return {copies[0], value.output};  // rewired to the aggregate later
  }
  if (uniform_[value.node]) return {copies[0], value.output};
  if (error_.ok()) {
    error_ = graph::invalid_argument("replicate: node '" + program_.graph.node(consumer).name +
                                     "' exists once but reads the per-replica value of '" +
                                     program_.graph.node(value.node).name + "'");
  }
  return {copies[0], value.output};
}

// The copy of an original value that replica r reads: its own clone, or the one copy.
ValueRef Rewriter::copy_on(ValueRef value, int replica) const {
  const std::vector<NodeId>& copies = copies_[value.node];
  return {copies[copies.size() == 1 ? 0 : static_cast<size_t>(replica)], value.output};
}

std::vector<NodeId> Rewriter::map_control(NodeId producer, int replica) const {
  const std::vector<NodeId>& copies = copies_[producer];
  if (copies.size() == 1 || replica == kHost) return copies;
  return {copies[static_cast<size_t>(replica)]};
}

graph::Status Rewriter::clone_nodes(const std::vector<NodeId>& order, const Classification& c) {
  copies_.assign(program_.graph.size(), {});
  uniform_ = c.uniform;
  for (NodeId id : order) {
    const Node& node = program_.graph.node(id);
    const std::vector<int> targets = [&] {
      if (!c.replicated[id]) return std::vector<int>{kHost};
      std::vector<int> all(static_cast<size_t>(replicas_));
      for (int r = 0; r < replicas_; ++r) all[static_cast<size_t>(r)] = r;
      return all;
    }();
    for (int replica : targets) {
      std::vector<ValueRef> inputs;
      for (ValueRef input : node.inputs) inputs.push_back(map_input(input, replica, id));
      std::vector<NodeId> control;
      for (NodeId producer : node.control_inputs) {
        for (NodeId mapped : map_control(producer, replica)) control.push_back(mapped);
      }
      const std::string name = replica == kHost ? node.name : "replica_" + std::to_string(replica) + "/" + node.name;
      copies_[id].push_back(add_copy(node, name, replica, std::move(inputs), std::move(control)));
    }
    MIRRA_RETURN_IF_ERROR(error_);
    if (c.batch_input[id]) {
      // The host splits the global batch; replica r reads share r.
      auto scope = b_.scope(node.name);
      b_.set_device(plan_.host);
      shares_[id] = ops::split_batch(b_, {copies_[id][0], 0}, replicas_);
      b_.set_device(std::nullopt);
      MIRRA_RETURN_IF_ERROR(b_.status());
    }
  }
  replica_of_.resize(out_.size(), kHost);
  return graph::Status();
}

// A value built on replica r's device (or the host).
void Rewriter::place(ValueRef value, int replica) {
  if (!value.valid()) return;
  out_.mutable_node(value.node).device = replica == kHost ? plan_.host : plan_.devices[static_cast<size_t>(replica)];
  replica_of_.resize(out_.size(), kHost);
  replica_of_[value.node] = replica;
}

ValueRef Rewriter::on(int replica, ValueRef value) {
  place(value, replica);
  return value;
}

// Note [Gradient accumulation]
// With accumulation, a step of the accumulate target adds each replica's gradient of its summed loss
// (g_r * b_r) to an accumulator on the replica, and the micro-batch's global size B to a count on the
// host; nothing is all-reduced or updated. The next train step reads accumulator + g_r * b_r and
// divides by count + B: summed over replicas, the gradient of the mean loss over every example since
// the last update, whatever the sizes of the micro-batches. It writes zeros into the accumulators
// (Assign) after reading them, so every update starts from zero, a checkpoint between updates holds
// zeros, and an accumulator that overflowed (fp16 loss scaling skips that update) starts clean.
// Across workers B is the all-reduced sum of the workers' batches, a scalar every step needs for its
// loss anyway; the gradients cross the network only in the train step.

// Note [Batch shares]
// Replica r's gradients times b_r / B, summed over the replicas, are the gradient of the mean loss
// over the global batch B; a replica with no examples contributes exactly zero. Every gradient is
// linear in the seed autodiff started from, so replica r's seed is multiplied by b_r / B: one scalar
// product instead of a pass over every gradient. With accumulation the seed is multiplied by b_r and
// the gradients are divided by the examples since the last update (Note [Gradient accumulation]).

// Multiplies each replica's seed by its share of the batch, rewiring the clones (ids below
// copies_end) that read it.
void Rewriter::scale_loss_gradients(NodeId copies_end) {
  const NodeId features = *program_.graph.find(program_.signature.features);
  const graph::DType dtype = program_.graph.type(program_.signature.loss).dtype;
  {
    auto scope = b_.scope("global_batch");
    global_batch_ = on(kHost, ops::cast(b_, on(kHost, ops::dim_size(b_, {copies_[features][0], 0}, 0)), dtype));
    if (plan_.across_workers) global_batch_ = on(kHost, ops::all_reduce(b_, {global_batch_}, 1, "sum", plan_.collective)[0]);
  }
  const bool accumulate = program_.accumulate_gradients;
  examples_ = accumulate ? accumulated(global_batch_, kHost, std::string(kAccumulatorScope), "examples") : global_batch_;
  for (int r = 0; r < replicas_; ++r) {
    auto scope = b_.scope("replica_" + std::to_string(r) + "/batch_share");
    const ValueRef local = on(r, ops::cast(b_, on(r, ops::dim_size(b_, shares_[features][static_cast<size_t>(r)], 0)), dtype));
    const ValueRef share = accumulate ? local : on(r, ops::div(b_, local, examples_));
    const ValueRef seed = copy_on(program_.loss_gradient, r);
    const ValueRef scaled = on(r, ops::mul(b_, seed, share));
    for (NodeId id = 0; id < copies_end; ++id) {
      for (ValueRef& input : out_.mutable_node(id).inputs) {
        if (input == seed) input = scaled;
      }
    }
  }
}

// gradients[j][r]: replica r's gradient of variable j, its share of the batch already in it; with
// accumulation, see Note [Gradient accumulation].
std::vector<std::vector<ValueRef>> Rewriter::replica_gradients() {
  std::vector<std::vector<ValueRef>> gradients(program_.variables_and_gradients.size());
  for (int r = 0; r < replicas_; ++r) {
    const std::string replica = "replica_" + std::to_string(r);
    for (size_t j = 0; j < gradients.size(); ++j) {
      const ValueRef gradient = copy_on(program_.variables_and_gradients[j].second, r);
      if (!program_.accumulate_gradients) {
        gradients[j].push_back(gradient);
        continue;
      }
      const std::string scope_name = replica + "/" + std::string(kAccumulatorScope);
      const ValueRef total =
          accumulated(gradient, r, scope_name, program_.graph.node(program_.variables_and_gradients[j].first.node).name);
      auto scope = b_.scope(scope_name);
      gradients[j].push_back(on(r, ops::div(b_, total, examples_)));
    }
  }
  return gradients;
}

// An accumulator `scope`/`name` for `value` on `replica`: the accumulate target adds value to it;
// returns accumulator + value, which the train target reads before it clears the accumulator.
ValueRef Rewriter::accumulated(ValueRef value, int replica, const std::string& scope, const std::string& name) {
  const graph::TensorType type = b_.type(value);
  auto in_scope = b_.scope(scope);
  const ValueRef accumulator =
      on(replica, ops::variable(b_, name, type.shape, ops::Initializer::zeros(), type.dtype, false));
  const NodeId add = ops::assign_add(b_, accumulator, value);
  const ValueRef total = on(replica, ops::add(b_, accumulator, value));
  const NodeId clear = ops::assign(b_, accumulator, on(replica, ops::fill(b_, type.shape, 0.0, type.dtype)));
  if (add == graph::kInvalidNode || clear == graph::kInvalidNode) return total;
  place({add, 0}, replica);
  place({clear, 0}, replica);
  out_.add_control_edge(total.node, clear);
  accumulations_.push_back(add);
  clears_.push_back(clear);
  return total;
}

// The variables' indices in the order their gradients become ready (the backward pass finishes the
// last layers first).
std::vector<size_t> Rewriter::ready_order(const std::vector<NodeId>& order) const {
  std::vector<size_t> position(program_.graph.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::vector<size_t> ready(program_.variables_and_gradients.size());
  for (size_t j = 0; j < ready.size(); ++j) ready[j] = j;
  std::stable_sort(ready.begin(), ready.end(), [&](size_t a, size_t b) {
    return position[program_.variables_and_gradients[a].second.node] < position[program_.variables_and_gradients[b].second.node];
  });
  return ready;
}

// Each variable's bytes (its gradient's), by index.
std::vector<int64_t> Rewriter::variable_bytes() const {
  std::vector<int64_t> bytes;
  for (const auto& [variable, gradient] : program_.variables_and_gradients) {
    const graph::TensorType& type = program_.graph.type(variable);
    bytes.push_back(type.shape.num_elements().value_or(0) * static_cast<int64_t>(graph::dtype_size(type.dtype)));
  }
  return bytes;
}

// Mirrored: AllReduce(SUM) per bucket, buckets in the order gradients become ready (the backward pass
// finishes the last layers first), a small first bucket, chained by control edges. CentralStorage: a
// sum per gradient on the host. Returns aggregated[j][r] (one entry per replica, or one).
std::vector<std::vector<ValueRef>> Rewriter::aggregate(const std::vector<std::vector<ValueRef>>& scaled,
                                                        const std::vector<NodeId>& order) {
  const size_t count = scaled.size();
  std::vector<std::vector<ValueRef>> aggregated(count);
  if (!plan_.mirror_state) {
    for (size_t j = 0; j < count; ++j) {
      auto scope = b_.scope("reduce/" + program_.graph.node(program_.variables_and_gradients[j].first.node).name);
      ValueRef sum = scaled[j][0];
      for (int r = 1; r < replicas_; ++r) sum = on(kHost, ops::add(b_, sum, scaled[j][static_cast<size_t>(r)]));
      aggregated[j] = {sum};
    }
    return aggregated;
  }
  const std::vector<std::vector<size_t>> buckets = fill_buckets(ready_order(order), variable_bytes(), plan_.buckets);
  CollectiveOrder issue_order(static_cast<size_t>(replicas_));
  for (size_t k = 0; k < buckets.size(); ++k) {
    std::vector<ValueRef> values;
    for (int r = 0; r < replicas_; ++r) {
      for (size_t j : buckets[k]) values.push_back(scaled[j][static_cast<size_t>(r)]);
    }
    const std::string group = "all_reduce/bucket_" + std::to_string(k);
    auto scope = b_.scope(group);
    // With bf16_all_reduce, f32 gradients travel as bf16: cast on their replica, widened back there.
    std::vector<bool> compressed(values.size(), false);
    for (size_t i = 0; i < values.size() && plan_.bf16_all_reduce; ++i) {
      if (b_.type(values[i]).dtype != graph::DType::f32) continue;
      compressed[i] = true;
      values[i] = on(static_cast<int>(i / buckets[k].size()), ops::cast(b_, values[i], graph::DType::bf16));
    }
    std::vector<ValueRef> reduced = reduce_bucket(values, buckets[k].size(), group, issue_order);
    if (reduced.empty()) return aggregated;
    for (size_t i = 0; i < reduced.size(); ++i) {
      const int replica = static_cast<int>(i / buckets[k].size());
      if (compressed[i]) reduced[i] = on(replica, ops::cast(b_, reduced[i], graph::DType::f32));
    }
    for (int r = 0; r < replicas_; ++r) {
      for (size_t i = 0; i < buckets[k].size(); ++i) {
        aggregated[buckets[k][i]].push_back(reduced[static_cast<size_t>(r) * buckets[k].size() + i]);
      }
    }
  }
  return aggregated;
}

// A collective that spans replicas (so of none of them) runs on `leader`'s device.
void Rewriter::run_on_leader(ValueRef collective, int leader) {
  out_.mutable_node(collective.node).device = plan_.devices[static_cast<size_t>(leader)];
}

// One bucket's sum for every replica (`values` and the result: replica r's j-th tensor at r * k + j),
// where plan_.reduction says (strategies/all_reduce_plan.h). The nodes that call a collective are
// chained in `order` (lanes by replica, the host's on lane 0). Empty on error.
std::vector<ValueRef> Rewriter::reduce_bucket(const std::vector<ValueRef>& values, size_t k, const std::string& group,
                                              CollectiveOrder& order) {
  const auto chain = [&](ValueRef collective, int lane) { order.chain(out_, collective.node, static_cast<size_t>(lane)); };
  const AllReducePlan& reduction = plan_.reduction;
  const bool peers = reduction.path == AllReducePath::peer || reduction.path == AllReducePath::hierarchical;
  if (!peers) {
    std::vector<ValueRef> reduced = ops::all_reduce(b_, values, replicas_, "sum", plan_.collective);
    if (!reduced.front().valid()) return {};
    // A single replica's bucket stays on its device (the sum of one is in place); replicas sharing
    // one device's memory are summed on it; the rest meet on the host.
    place(reduced.front(), kHost);
    if (reduction.path == AllReducePath::on_device || (replicas_ == 1 && !plan_.across_workers)) {
      run_on_leader(reduced.front(), reduction.groups.empty() ? 0 : reduction.groups[0][0]);
    }
    chain(reduced.front(), 0);
    return reduced;
  }
  // Each device's replicas are summed on its leader's device (hierarchical), then the leaders sum
  // among themselves, and every replica reads its device's total (one memory, no copy).
  std::vector<ValueRef> reduced(values.size());
  const int64_t devices = static_cast<int64_t>(reduction.groups.size());
  for (int64_t g = 0; g < devices; ++g) {
    const std::vector<int>& group_replicas = reduction.groups[static_cast<size_t>(g)];
    const int leader = group_replicas.front();
    std::vector<ValueRef> sums;
    for (int r : group_replicas) sums.insert(sums.end(), values.begin() + r * k, values.begin() + (r + 1) * k);
    auto scope = b_.scope("device_" + std::to_string(g));
    if (group_replicas.size() > 1) {
      sums = ops::all_reduce(b_, sums, static_cast<int64_t>(group_replicas.size()), "sum", plan_.collective);
      if (!sums.front().valid()) return {};
      place(sums.front(), kHost);
      run_on_leader(sums.front(), leader);
      sums.resize(k);  // the leader's
    }
    std::vector<ValueRef> totals =
        ops::peer_all_reduce(b_, sums, {.group = group, .rank = g, .ranks = devices}, "sum", plan_.collective);
    if (!totals.front().valid()) return {};
    place(totals.front(), kHost);
    run_on_leader(totals.front(), leader);
    chain(totals.front(), leader);
    for (int r : group_replicas) {
      for (size_t j = 0; j < k; ++j) reduced[static_cast<size_t>(r) * k + j] = totals[j];
    }
  }
  return reduced;
}

// For shard_optimizer_state: each variable's copies and updates, when every replica's raw gradient is
// read by its update alone (a clipping norm or a finiteness check would need the whole reduced
// gradient). The caller fills in the gradients to reduce.
graph::Expected<std::vector<ShardedVariable>> Rewriter::shardable(const std::vector<std::vector<ValueRef>>& raw,
                                                                  NodeId copies_end) const {
  const graph::Graph& g = program_.graph;
  std::map<ValueRef, const Node*> update_of;  // by variable
  for (const Node& node : g.nodes()) {
    if (update_gradient(node)) update_of[node.inputs[0]] = &node;
  }
  std::map<ValueRef, std::vector<std::pair<NodeId, size_t>>> readers;  // of each raw gradient: (node, input)
  for (const std::vector<ValueRef>& copies : raw) {
    for (ValueRef value : copies) readers[value];
  }
  for (NodeId id = 0; id < copies_end; ++id) {
    const std::vector<ValueRef>& inputs = out_.node(id).inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (auto found = readers.find(inputs[i]); found != readers.end()) found->second.emplace_back(id, i);
    }
  }
  std::vector<ShardedVariable> variables;
  for (size_t j = 0; j < raw.size(); ++j) {
    const ValueRef variable = program_.variables_and_gradients[j].first;
    ShardedVariable v{.name = g.node(variable.node).name};
    const auto update = update_of.find(variable);
    if (update == update_of.end()) {
      return graph::invalid_argument("shard_optimizer_state: variable '" + v.name + "' has no optimizer update");
    }
    const size_t gradient_input = *update_gradient(*update->second);
    for (int r = 0; r < replicas_; ++r) {
      const NodeId copy = copies_[update->second->id][static_cast<size_t>(r)];
      for (const auto& [reader, input] : readers.at(raw[j][static_cast<size_t>(r)])) {
        if (reader == copy && input == gradient_input) continue;
        int replica = -1;
        return graph::invalid_argument("shard_optimizer_state: the gradient of '" + v.name + "' is read by '" +
                                       std::string(replica_free_name(out_.node(reader).name, &replica)) +
                                       "' besides its update; sharded optimizer state needs updates that read their "
                                       "gradients directly (no clip_global_norm, loss scaling or check_numerics)");
      }
      v.copies.push_back(copy_on(variable, r));
      v.updates.push_back(copy);
    }
    variables.push_back(std::move(v));
  }
  return variables;
}

// Every cloned consumer of a replica's raw gradient reads the aggregate instead.
void Rewriter::rewire(const std::vector<std::vector<ValueRef>>& raw, const std::vector<std::vector<ValueRef>>& aggregated,
                      NodeId copies_end) {
  std::map<ValueRef, size_t> gradient_index;
  for (size_t j = 0; j < raw.size(); ++j) {
    for (ValueRef value : raw[j]) gradient_index[value] = j;
  }
  for (NodeId id = 0; id < copies_end; ++id) {
    for (ValueRef& input : out_.mutable_node(id).inputs) {
      auto found = gradient_index.find(input);
      if (found == gradient_index.end()) continue;
      const std::vector<ValueRef>& sums = aggregated[found->second];
      input = sums.size() == 1 ? sums[0] : sums[static_cast<size_t>(std::max(replica_of_[id], 0))];
    }
  }
}

// Replica r's count of the elements of `value` (one of its clones' values), in the loss's dtype.
ValueRef Rewriter::element_count(ValueRef value, int replica) {
  const graph::Shape& shape = program_.graph.type(value).shape;
  const graph::DType dtype = program_.graph.type(program_.signature.loss).dtype;
  const ValueRef copy = copy_on(value, replica);
  ValueRef count;       // the product of the dims known at run time (none yet)
  int64_t known = 1;    // of those known here
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape.dim(d) >= 0) {
      known *= shape.dim(d);
      continue;
    }
    const ValueRef dim = on(replica, ops::cast(b_, on(replica, ops::dim_size(b_, copy, d)), dtype));
    count = count.valid() ? on(replica, ops::mul(b_, count, dim)) : dim;
  }
  if (known == 1 && count.valid()) return count;
  const ValueRef constant = on(replica, ops::scalar_of(b_, static_cast<double>(known), copy));
  return count.valid() ? on(replica, ops::mul(b_, count, constant)) : constant;
}

// The metrics of the global batch on the host: the sum over the replicas (and workers) of each one's
// summed losses, divided by the elements they average, in place of the one-replica loss's batch mean
// (the rest of the loss built around it again: its terms that do not depend on the batch read
// replica 0's copies, which every replica holds alike); the correct counts summed.
graph::Status Rewriter::add_metrics(TrainingProgram& result, NodeId batch_mean, const Classification& c) {
  const TrainingProgram& p = program_;
  const ValueRef averaged = p.graph.node(batch_mean).inputs[0];
  auto scope = b_.scope("metrics");
  ValueRef loss_sum, count, correct;
  for (int r = 0; r < replicas_; ++r) {
    const ValueRef replica_loss = on(r, ops::reduce_sum(b_, copy_on(averaged, r)));
    const ValueRef replica_count = element_count(averaged, r);
    const ValueRef replica_correct = copy_on(p.signature.correct, r);
    loss_sum = r == 0 ? replica_loss : on(kHost, ops::add(b_, loss_sum, replica_loss));
    count = r == 0 ? replica_count : on(kHost, ops::add(b_, count, replica_count));
    correct = r == 0 ? replica_correct : on(kHost, ops::add(b_, correct, replica_correct));
  }
  if (plan_.across_workers) {
    const std::vector<ValueRef> sums = ops::all_reduce(b_, {loss_sum, count, correct}, 1, "sum", plan_.collective);
    loss_sum = on(kHost, sums[0]);
    count = sums[1];
    correct = sums[2];
  }
  const ValueRef mean = on(kHost, ops::div(b_, loss_sum, count));
  result.signature.loss = rebuild_loss(
      b_, p.graph, p.signature.loss, batch_mean, mean, c.from_batch, [&](ValueRef term) { return copy_on(term, 0); },
      [&](ValueRef value) { return on(kHost, value); });
  result.signature.correct = correct;
  return b_.status();
}

graph::Expected<TrainingProgram> Rewriter::run() {
  const TrainingProgram& p = program_;
  if (replicas_ < 1) return graph::invalid_argument("replicate: no devices");
  if (plan_.shard_optimizer_state && !plan_.mirror_state) {
    return graph::invalid_argument("replicate: sharded optimizer state needs mirrored state");
  }
  const auto features = p.graph.find(p.signature.features);
  if (!features) return graph::invalid_argument("replicate: no batch input named '" + p.signature.features + "'");
  if (!p.loss_gradient.valid() || p.loss_gradient.node >= p.graph.size()) {
    return graph::invalid_argument("replicate: the program does not name the seed of its gradients (loss_gradient)");
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<NodeId> order, p.graph.topological_order());
  const Classification c = classify(p, order, plan_.mirror_state);
  if (!c.batch_input[*features]) {
    return graph::invalid_argument("replicate: '" + p.signature.features + "' is not a batch input (dim 0 unknown)");
  }
  MIRRA_ASSIGN_OR_RETURN(const NodeId batch_mean, batch_mean_of(p.graph, *p.ops, p.signature.loss, c.from_batch));
  MIRRA_RETURN_IF_ERROR(clone_nodes(order, c));
  const NodeId copies_end = static_cast<NodeId>(out_.size());
  scale_loss_gradients(copies_end);

  std::vector<std::vector<ValueRef>> raw(p.variables_and_gradients.size());
  for (size_t j = 0; j < raw.size(); ++j) {
    const ValueRef gradient = p.variables_and_gradients[j].second;
    for (NodeId copy : copies_[gradient.node]) raw[j].push_back({copy, gradient.output});
  }
  std::vector<std::vector<ValueRef>> aggregated;
  std::vector<NodeId> writes;  // with shard_optimizer_state: the updated variables' writes
  if (plan_.shard_optimizer_state) {
    MIRRA_ASSIGN_OR_RETURN(std::vector<ShardedVariable> variables, shardable(raw, copies_end));
    const std::vector<std::vector<ValueRef>> gradients = replica_gradients();
    MIRRA_RETURN_IF_ERROR(b_.status());
    std::vector<ShardedVariable> ready;
    for (size_t j : ready_order(order)) {
      variables[j].gradients = gradients[j];
      ready.push_back(variables[j]);
    }
    MIRRA_ASSIGN_OR_RETURN(writes, shard_updates(b_, ready,
                                                 {.devices = plan_.devices,
                                                  .host = plan_.host,
                                                  .collective = plan_.collective,
                                                  .worker = plan_.worker,
                                                  .buckets = plan_.buckets,
                                                  .peer = plan_.reduction.path == AllReducePath::peer}));
    for (size_t j = 0; j < raw.size(); ++j) {
      const graph::Node& update = out_.node(variables[j].updates[0]);
      aggregated.push_back({update.inputs[*update_gradient(update)]});  // replica 0's share
    }
  } else {
    aggregated = aggregate(replica_gradients(), order);
    MIRRA_RETURN_IF_ERROR(b_.status());
    rewire(raw, aggregated, copies_end);
  }

  TrainingProgram result;
  result.ops = p.ops;
  result.signature = p.signature;
  result.signature.train = copies_[p.signature.train][0];
  result.accumulate_gradients = p.accumulate_gradients;
  for (NodeId write : writes) out_.add_control_edge(write, result.signature.train);
  if (p.accumulate_gradients) {
    for (NodeId clear : clears_) out_.add_control_edge(clear, result.signature.train);
    result.signature.accumulate = ops::no_op(b_, "accumulate", accumulations_);
    place({result.signature.accumulate, 0}, kHost);
  }
  if (p.signature.learning_rate.valid()) result.signature.learning_rate = copy_on(p.signature.learning_rate, 0);
  for (size_t j = 0; j < raw.size(); ++j) {
    result.variables_and_gradients.emplace_back(copy_on(p.variables_and_gradients[j].first, 0), aggregated[j][0]);
  }
  for (NodeId id : p.step_state) result.step_state.push_back(copies_[id][0]);
  MIRRA_RETURN_IF_ERROR(add_metrics(result, batch_mean, c));
  MIRRA_RETURN_IF_ERROR(graph::verify_structure(out_));
  return result;
}

}  // namespace

graph::Expected<TrainingProgram> replicate(const TrainingProgram& program, const ReplicationPlan& plan) {
  graph::Graph out;
  Rewriter rewriter(program, plan, out);
  MIRRA_ASSIGN_OR_RETURN(TrainingProgram result, rewriter.run());
  result.graph = std::move(out);
  return result;
}

}  // namespace mirra::strategies
