// shard_updates: reduce-scatter of each gradient, updates of the replica's share, the shares joined
// back; and the replicate pass that hands it the cloned variables (shard_optimizer_updates).
#include "strategies/sharded_updates.h"

#include <map>

#include "graph/graph.h"
#include "ops/ops.h"
#include "runtime/collectives/communicator.h"
#include "strategies/collective_order.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

// Note [Sharded optimizer state]
// For a variable of n elements over N replicas, replica r owns the flat elements
// [first_r, first_r + share_r) (runtime::participant_share: shares differ by at most one, the first
// larger, as the collectives' reduce_scatter cuts them). Per step and variable:
//   flat_r    = Reshape(gradient_r, [n])                  replica r
//   shard_r   = ReduceScatter(flat_r)                     rank r of N, on the host: the sum's share r
//             (on replica r's device when each replica has a device of its own: the devices
//             reduce-scatter among themselves, NCCL between GPUs)
//   part_r    = Slice(Reshape(variable_r, [n]), first_r, share_r)   a copy, on replica r
//   update_r  : applies shard_r to part_r, in place, with slots of share_r elements
//   updated_r = Identity(part_r) after update_r           the result, as a value others can read
//   Assign(variable_r, updated_0 .. updated_N-1)          replica r: the shares joined in order
// On the host the all-gather is the graph's: every replica's Assign reads every replica's updated
// share (placement copies a share to a device with memory of its own), so no collective and no
// gathered buffer is needed, and nothing larger than a share is ever allocated for it. Devices of one
// replica each (`peer`) gather among themselves instead, one AllGather per device and bucket (NCCL
// between GPUs), so a share crosses from device to device once rather than through the host:
//   gathered_r = AllGather(updated_r of each variable, rows = n of each)   rank r of N
//   Assign(variable_r, Reshape(gathered_r, the variable's shape))
// The update's own control inputs (every reader of the replica's variable) precede its Assign, so
// no reader of this step sees a half-written variable. Every replica assigns the same bits, so the
// copies stay bitwise equal; the arithmetic of each element is the unsharded update's, so the result
// equals unsharded Mirrored up to the reduction's summation order. One ReduceScatter serves a bucket
// of variables (the all-reduce's bucket sizes, in the order gradients become ready), each cut on its
// own as above.
//
// Across W workers of N local replicas each, share r is cut again among the workers
// (runtime::worker_share), so each of the W·N replicas of the run owns 1/(W·N) of every slot. The
// ReduceScatter hands replica r of worker w its part of share r of the sum over every replica; the
// update applies it to that part of the variable; then one AllGather per local replica and bucket (a
// group of its own across the workers) gathers every worker's updated parts of the bucket's shares r
// into the whole shares, which the Assigns join as above:
//   gathered_r = AllGather(updated_r of each variable, rows = share_r of each)   replica r, across workers
//   Assign(variable_r, gathered_0 .. gathered_N-1)
// The network carries each element's sum once to its owner and each updated element once from it,
// in two calls per bucket.

namespace {

// The `peer` join of one bucket: each device gathers every device's updated shares of the bucket's
// variables (`updated[r][m]`, of members[m]) and writes them into its copy of each; appends the writes.
graph::Status gather_among_devices(graph::Builder& b, const std::vector<ShardedVariable>& variables,
                                   const std::vector<size_t>& members, const std::vector<int64_t>& elements,
                                   const ShardingPlan& plan, size_t bucket,
                                   const std::vector<std::vector<graph::ValueRef>>& updated, CollectiveOrder& gather_order,
                                   std::vector<graph::NodeId>& writes) {
  const int64_t replicas = static_cast<int64_t>(plan.devices.size());
  const std::string group = "all_gather/bucket_" + std::to_string(bucket);
  std::vector<int64_t> sizes;
  for (size_t j : members) sizes.push_back(elements[j]);
  for (int64_t r = 0; r < replicas; ++r) {
    b.set_device(plan.devices[static_cast<size_t>(r)]);
    std::vector<graph::ValueRef> gathered;
    {
      auto scope = b.scope(group + "/rank_" + std::to_string(r));
      gathered = ops::all_gather(b, updated[static_cast<size_t>(r)], {.group = group, .rank = r, .ranks = replicas}, sizes,
                                 plan.collective);
      MIRRA_RETURN_IF_ERROR(b.status());
    }
    gather_order.chain(b.graph(), gathered[0].node, static_cast<size_t>(r));
    for (size_t m = 0; m < members.size(); ++m) {
      const ShardedVariable& v = variables[members[m]];
      auto scope = b.scope("replica_" + std::to_string(r) + "/shard/" + v.name);
      const graph::ValueRef copy = v.copies[static_cast<size_t>(r)];
      writes.push_back(ops::assign(b, copy, ops::reshape(b, gathered[m], b.type(copy).shape.dims)));
    }
  }
  return b.status();
}

// Clipping by the global norm (ops::clip_by_global_norm's factor, clip / max(norm, clip), per replica):
// each replica sums the squares of its shares of every gradient, and one all-reduce (across workers
// too) adds the replicas' sums, so every replica of every worker scales its shares by the same factor.
graph::Expected<std::vector<graph::ValueRef>> clipping_scales(graph::Builder& b, const std::vector<std::vector<size_t>>& buckets,
                                                              const std::vector<std::vector<graph::ValueRef>>& bucket_shards,
                                                              const ShardingPlan& plan, CollectiveOrder& issue_order) {
  const int64_t replicas = static_cast<int64_t>(plan.devices.size());
  const std::string scope_name = std::string("shard/") + std::string(ops::kClipByGlobalNormScope);
  std::vector<graph::ValueRef> partial;
  for (int64_t r = 0; r < replicas; ++r) {
    auto scope = b.scope("replica_" + std::to_string(r) + "/" + scope_name);
    b.set_device(plan.devices[static_cast<size_t>(r)]);
    graph::ValueRef sum;
    for (size_t bucket = 0; bucket < buckets.size(); ++bucket) {
      const size_t k = buckets[bucket].size();
      for (size_t m = 0; m < k; ++m) {
        const graph::ValueRef squares = ops::square(b, bucket_shards[bucket][static_cast<size_t>(r) * k + m]);
        const graph::ValueRef term = ops::reduce_sum(b, squares);
        sum = sum.valid() ? ops::add(b, sum, term) : term;
      }
    }
    partial.push_back(sum);
  }
  std::vector<graph::ValueRef> total;
  b.set_device(plan.host);
  for (int64_t r = 0; r < replicas; ++r) {
    auto scope = b.scope(scope_name + "/rank_" + std::to_string(r));
    total.push_back(ops::all_reduce(b, {partial[static_cast<size_t>(r)]}, {.group = scope_name, .rank = r, .ranks = replicas},
                                    "sum", plan.collective)[0]);
    MIRRA_RETURN_IF_ERROR(b.status());
    issue_order.chain(b.graph(), total.back().node, static_cast<size_t>(r));
  }
  std::vector<graph::ValueRef> scales;
  for (int64_t r = 0; r < replicas; ++r) {
    auto scope = b.scope("replica_" + std::to_string(r) + "/" + scope_name);
    b.set_device(plan.devices[static_cast<size_t>(r)]);
    const graph::ValueRef norm = ops::sqrt(b, total[static_cast<size_t>(r)]);
    const graph::ValueRef clip = ops::scalar_of(b, *plan.clip_global_norm, norm);
    scales.push_back(ops::div(b, clip, ops::maximum(b, norm, clip)));
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  return scales;
}

}  // namespace

graph::Expected<std::vector<graph::NodeId>> shard_updates(graph::Builder& b, const std::vector<ShardedVariable>& variables,
                                                          const ShardingPlan& plan) {
  graph::Graph& g = b.graph();
  const int64_t replicas = static_cast<int64_t>(plan.devices.size());
  const bool across_workers = plan.worker.workers > 1;
  const auto on = [&](int64_t r) { b.set_device(plan.devices[static_cast<size_t>(r)]); };
  std::vector<int64_t> elements, bytes;
  std::vector<size_t> order;
  for (const ShardedVariable& v : variables) {
    const graph::TensorType type = b.type(v.copies[0]);
    const std::optional<int64_t> n = type.shape.num_elements();
    if (!n) return graph::invalid_argument("shard_optimizer_state: variable '" + v.name + "' has no fixed size");
    elements.push_back(*n);
    bytes.push_back(*n * static_cast<int64_t>(graph::dtype_size(type.dtype)));
    order.push_back(order.size());
  }
  std::vector<graph::NodeId> writes;
  CollectiveOrder issue_order;   // each replica's reduce-scatters (and clipping's all-reduce)
  CollectiveOrder gather_order;  // each device's all-gathers
  const std::vector<std::vector<size_t>> buckets = fill_buckets(order, bytes, plan.buckets);
  // Every bucket's reduce-scatter first: clipping needs every share before any update.
  std::vector<std::vector<graph::ValueRef>> bucket_shards;  // replica r's share of the bucket's j-th at r * k + j
  for (size_t bucket = 0; bucket < buckets.size(); ++bucket) {
    const std::vector<size_t>& members = buckets[bucket];
    const size_t k = members.size();
    std::vector<graph::ValueRef> flat;  // replica r's j-th at r * k + j
    for (int64_t r = 0; r < replicas; ++r) {
      for (size_t j : members) {
        auto scope = b.scope("replica_" + std::to_string(r) + "/shard/" + variables[j].name);
        on(r);
        flat.push_back(ops::reshape(b, variables[j].gradients[static_cast<size_t>(r)], {elements[j]}));
      }
    }
    const std::string group = "reduce_scatter/bucket_" + std::to_string(bucket);
    std::vector<graph::ValueRef> shards;  // replica r's share of its j-th at r * k + j
    for (int64_t r = 0; r < replicas; ++r) {
      auto scope = b.scope(group + "/rank_" + std::to_string(r));
      if (plan.peer) {
        on(r);
      } else {
        b.set_device(plan.host);
      }
      const std::vector<graph::ValueRef> mine(flat.begin() + r * static_cast<int64_t>(k), flat.begin() + (r + 1) * static_cast<int64_t>(k));
      const std::vector<graph::ValueRef> share =
          ops::reduce_scatter(b, mine, {.group = group, .rank = r, .ranks = replicas}, "sum", plan.collective, plan.worker);
      MIRRA_RETURN_IF_ERROR(b.status());
      issue_order.chain(g, share[0].node, static_cast<size_t>(r));
      shards.insert(shards.end(), share.begin(), share.end());
    }
    bucket_shards.push_back(std::move(shards));
  }
  std::vector<graph::ValueRef> scales;  // per replica, with clipping
  if (plan.clip_global_norm) {
    MIRRA_ASSIGN_OR_RETURN(scales, clipping_scales(b, buckets, bucket_shards, plan, issue_order));
  }

  for (size_t bucket = 0; bucket < buckets.size(); ++bucket) {
    const std::vector<size_t>& members = buckets[bucket];
    const size_t k = members.size();
    const std::vector<graph::ValueRef>& shards = bucket_shards[bucket];
    std::vector<std::vector<graph::ValueRef>> updated(static_cast<size_t>(replicas));  // [r][position in bucket]
    for (int64_t r = 0; r < replicas; ++r) {
      for (size_t m = 0; m < k; ++m) {
        const ShardedVariable& v = variables[members[m]];
        const graph::TensorType type = b.type(v.copies[0]);
        const runtime::ShareRange mine =
            runtime::worker_share(elements[members[m]], replicas, r, plan.worker.workers, plan.worker.worker);
        const graph::NodeId update = v.updates[static_cast<size_t>(r)];
        const size_t gradient_input = *b.registry().find(g.node(update).op)->update_gradient;
        auto scope = b.scope("replica_" + std::to_string(r) + "/shard/" + v.name);
        on(r);
        const graph::ValueRef part =
            ops::slice(b, ops::reshape(b, v.copies[static_cast<size_t>(r)], {elements[members[m]]}), {mine.first}, {mine.count});
        MIRRA_RETURN_IF_ERROR(b.status());
        graph::Node& node = g.mutable_node(update);
        node.inputs[0] = part;
        const graph::ValueRef shard = shards[static_cast<size_t>(r) * k + m];
        node.inputs[gradient_input] = scales.empty() ? shard : ops::mul(b, shard, scales[static_cast<size_t>(r)]);
        for (size_t i = 1; i < gradient_input; ++i) {
          graph::Node& slot = g.mutable_node(node.inputs[i].node);
          if (slot.op != "Variable") {
            return graph::invalid_argument("shard_optimizer_state: operand " + std::to_string(i) + " of '" + node.name +
                                           "' is no Variable (" + slot.op + ")");
          }
          slot.attrs.set("shard_of", type.shape);
          slot.attrs.set("shape", graph::Shape{mine.count});
          slot.outputs[0].shape = graph::Shape{mine.count};
        }
        updated[static_cast<size_t>(r)].push_back(ops::identity(b, part));
        MIRRA_RETURN_IF_ERROR(b.status());
        g.add_control_edge(update, updated[static_cast<size_t>(r)].back().node);
      }
      if (across_workers) {
        const std::string scope_name = "replica_" + std::to_string(r) + "/shard/bucket_" + std::to_string(bucket);
        auto scope = b.scope(scope_name);
        on(r);
        std::vector<int64_t> rows;
        for (size_t j : members) rows.push_back(runtime::participant_share(elements[j], replicas, r));
        updated[static_cast<size_t>(r)] = ops::all_gather(b, updated[static_cast<size_t>(r)], {.group = scope_name + "/all_gather"},
                                                          rows, plan.collective, plan.worker);
        MIRRA_RETURN_IF_ERROR(b.status());
      }
    }
    if (plan.peer) {
      MIRRA_RETURN_IF_ERROR(gather_among_devices(b, variables, members, elements, plan, bucket, updated, gather_order, writes));
      continue;
    }
    for (size_t m = 0; m < k; ++m) {
      const ShardedVariable& v = variables[members[m]];
      std::vector<graph::ValueRef> parts;
      for (int64_t r = 0; r < replicas; ++r) parts.push_back(updated[static_cast<size_t>(r)][m]);
      if (replicas == 1) {  // one replica per worker: its gathered share is the whole variable
        auto scope = b.scope("replica_0/shard/" + v.name);
        on(0);
        parts[0] = ops::reshape(b, parts[0], b.type(v.copies[0]).shape.dims);
      }
      for (int64_t r = 0; r < replicas; ++r) {
        auto scope = b.scope("replica_" + std::to_string(r) + "/shard/" + v.name);
        on(r);
        writes.push_back(ops::assign(b, v.copies[static_cast<size_t>(r)], parts));
      }
    }
    MIRRA_RETURN_IF_ERROR(b.status());
  }
  b.set_device(std::nullopt);
  return writes;
}

namespace {

// The clip norm when `applied` is ops::clip_by_global_norm's Mul(raw, scale) with scale = Div(clip,
// Maximum(Sqrt(sum of squares), clip)) and clip a Fill; nullopt for anything else.
std::optional<double> clip_norm_of(const graph::Graph& g, graph::ValueRef applied, graph::ValueRef raw) {
  const graph::Node& scaled = g.node(applied.node);
  if (scaled.op != "Mul" || scaled.inputs.size() != 2 || scaled.inputs[0] != raw) return std::nullopt;
  const graph::Node& scale = g.node(scaled.inputs[1].node);
  if (scale.op != "Div") return std::nullopt;
  const graph::Node& clip = g.node(scale.inputs[0].node);
  const graph::Node& larger = g.node(scale.inputs[1].node);
  if (clip.op != "Fill" || larger.op != "Maximum" || larger.inputs[1] != scale.inputs[0] || g.node(larger.inputs[0].node).op != "Sqrt") {
    return std::nullopt;
  }
  return graph::checked_attr<double>(clip, "value");
}

// Each variable's copies and updates, when every replica's raw gradient is read by its update alone,
// or by the clipping by the global norm that its update reads (the clip's norm, then, which the
// sharded updates take over: a finiteness check or loss scaling would need the whole reduced
// gradient). The caller fills in the gradients to reduce.
struct Shardable {
  std::vector<ShardedVariable> variables;
  std::optional<double> clip_global_norm;
};

graph::Expected<Shardable> shardable(const ReplicaGraph& r, const std::vector<std::vector<graph::ValueRef>>& raw) {
  const graph::Graph& g = r.program.graph;
  std::map<graph::ValueRef, const graph::Node*> update_of;  // by variable
  for (const graph::Node& node : g.nodes()) {
    if (r.update_gradient(node)) update_of[node.inputs[0]] = &node;
  }
  std::map<graph::ValueRef, std::vector<std::pair<graph::NodeId, size_t>>> readers;  // of each raw gradient: (node, input)
  for (const std::vector<graph::ValueRef>& copies : raw) {
    for (graph::ValueRef value : copies) readers[value];
  }
  for (graph::NodeId id = 0; id < r.copies_end; ++id) {
    const std::vector<graph::ValueRef>& inputs = r.graph.node(id).inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (auto found = readers.find(inputs[i]); found != readers.end()) found->second.emplace_back(id, i);
    }
  }
  Shardable result;
  for (size_t j = 0; j < raw.size(); ++j) {
    const graph::ValueRef variable = r.program.variables_and_gradients[j].first;
    ShardedVariable v{.name = g.node(variable.node).name};
    const auto update = update_of.find(variable);
    if (update == update_of.end()) {
      return graph::invalid_argument("shard_optimizer_state: variable '" + v.name + "' has no optimizer update");
    }
    const size_t gradient_input = *r.update_gradient(*update->second);
    for (int replica = 0; replica < r.replicas; ++replica) {
      const graph::NodeId copy = r.copies[update->second->id][static_cast<size_t>(replica)];
      const graph::ValueRef gradient = raw[j][static_cast<size_t>(replica)];
      const graph::ValueRef applied = r.graph.node(copy).inputs[gradient_input];
      const std::optional<double> clip = clip_norm_of(r.graph, applied, gradient);
      if (j == 0 && replica == 0) result.clip_global_norm = clip;
      if (clip != result.clip_global_norm) {
        return graph::invalid_argument("shard_optimizer_state: '" + v.name + "' is " + (clip ? "" : "not ") +
                                       "clipped by the global norm as the first variable is" + (clip ? " not" : ""));
      }
      for (const auto& [reader, input] : readers.at(gradient)) {
        if (reader == copy && input == gradient_input) continue;
        const graph::Node& node = r.graph.node(reader);
        int reader_replica = -1;
        const std::string_view reader_name = replica_free_name(node.name, &reader_replica);
        const bool norm_term = node.op == "Square" && reader_name.find(std::string(ops::kClipByGlobalNormScope) + "/") != std::string_view::npos;
        if (clip && ((reader == applied.node && input == 0) || norm_term)) {
          continue;  // the clip's scaling and its norm, which the sharded updates compute from the shares
        }
        return graph::invalid_argument("shard_optimizer_state: the gradient of '" + v.name + "' is read by '" +
                                       std::string(reader_name) +
                                       "' besides its update; sharded optimizer state needs updates that read their "
                                       "gradients directly or clipped by the global norm (no loss scaling or check_numerics)");
      }
      v.copies.push_back(r.copy_on(variable, replica));
      v.updates.push_back(copy);
    }
    result.variables.push_back(std::move(v));
  }
  return result;
}

}  // namespace

graph::Status shard_optimizer_updates(ReplicaGraph& r) {
  const std::vector<std::vector<graph::ValueRef>> raw = r.raw_gradients();
  MIRRA_ASSIGN_OR_RETURN(Shardable sharding, shardable(r, raw));
  std::vector<ShardedVariable>& variables = sharding.variables;
  const std::vector<std::vector<graph::ValueRef>> gradients = r.replica_gradients();
  MIRRA_RETURN_IF_ERROR(r.builder.status());
  std::vector<ShardedVariable> ready;
  for (size_t j : r.ready_order()) {
    variables[j].gradients = gradients[j];
    ready.push_back(variables[j]);
  }
  MIRRA_ASSIGN_OR_RETURN(r.writes, shard_updates(r.builder, ready,
                                                 {.devices = r.plan.devices,
                                                  .host = r.plan.host,
                                                  .collective = r.plan.collective,
                                                  .worker = r.plan.worker,
                                                  .buckets = r.plan.buckets,
                                                  .peer = r.plan.reduction.path == AllReducePath::peer,
                                                  .clip_global_norm = sharding.clip_global_norm}));
  r.aggregated.clear();
  for (const ShardedVariable& v : variables) {
    const graph::Node& update = r.graph.node(v.updates[0]);
    r.aggregated.push_back({update.inputs[*r.update_gradient(update)]});  // replica 0's share
  }
  return graph::Status();
}

}  // namespace mirra::strategies
