// weight_gradient_seeds: each replica's seed of its gradients times its share of the batch, or, for a
// loss divided by a declared weight, each replica's sum divided by the weight of the whole batch.
#include "ops/ops.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

// Note [Batch shares]
// Replica r's gradients times b_r / B, summed over the replicas, are the gradient of the mean loss
// over the global batch B; a replica with no examples contributes exactly zero. Every gradient is
// linear in the seed autodiff started from, so replica r's seed is multiplied by b_r / B: one scalar
// product instead of a pass over every gradient. With accumulation the seed is multiplied by b_r and
// the gradients are divided by the examples since the last update (Note [Gradient accumulation]).
// Where the replicas feed their own batches (the parameter-server strategy's workers, each a process)
// no replica knows B before every share has reached the host, so replica r's seed is multiplied by
// b_r alone and the host divides the sum of the gradients by B (aggregate_gradients): the same
// gradient, with no round trip to the host before a replica's backward pass can start.

// Note [Loss weights]
// A loss Div(s, w) + d, whose weight w the signature declares (the tokens a mask keeps) and whose d
// does not depend on the batch (a weight decay), is exact over any split only if no replica divides
// by its own w_r: a replica whose share keeps no token would compute 0/0. So with N replicas in all
// (of every worker) and W = sum_r w_r, the weight of the whole batch (summed on the host, and across
// workers), each replica's Div, and every node of its gradients that read w_r, read W / N instead,
// and each replica's seed is multiplied by 1 / N: replica r's gradients are those of s_r / W + d / N,
// which sum to the gradients of S / W + d. With accumulation the seed is multiplied by W / N instead
// and the accumulated gradients divided by the weight since the last update (Note [Gradient
// accumulation]).

namespace {

// Every clone of the batch mean Div, or of a node its gradients are computed with, reads `denominator`
// where it read its replica's weight.
void divide_by(ReplicaGraph& r, graph::ValueRef denominator) {
  const TrainingProgram& p = r.program;
  std::vector<bool> after_seed(p.graph.size(), false);
  for (graph::NodeId id : r.order) {
    after_seed[id] = id == p.loss_gradient.node || id == r.batch_mean;
    for (graph::ValueRef input : p.graph.node(id).inputs) after_seed[id] = after_seed[id] || after_seed[input.node];
  }
  for (graph::NodeId id : r.order) {
    if (!after_seed[id]) continue;
    for (graph::NodeId copy : r.copies[id]) {
      const int replica = r.replica_of(copy);
      if (replica == kHost) continue;
      for (graph::ValueRef& input : r.graph.mutable_node(copy).inputs) {
        if (input == r.copy_on(p.signature.loss_weight, replica)) input = denominator;
      }
    }
  }
}

// Replica r's seed times `share`, in the scope the caller opened: every clone that reads the seed
// reads it scaled.
void scale_seed(ReplicaGraph& r, int replica, graph::ValueRef share) {
  const graph::ValueRef seed = r.copy_on(r.program.loss_gradient, replica);
  const graph::ValueRef scaled = r.on(replica, ops::mul(r.builder, seed, share));
  for (graph::NodeId id = 0; id < r.copies_end; ++id) {
    for (graph::ValueRef& input : r.graph.mutable_node(id).inputs) {
      if (input == seed) input = scaled;
    }
  }
}

graph::Status divide_by_the_batch_weight(ReplicaGraph& r) {
  graph::Builder& b = r.builder;
  const TrainingProgram& p = r.program;
  auto scope = b.scope("global_batch");
  graph::ValueRef total = r.copy_on(p.signature.loss_weight, 0);
  for (int replica = 1; replica < r.replicas; ++replica) {
    total = r.on(kHost, ops::add(b, total, r.copy_on(p.signature.loss_weight, replica)));
  }
  if (r.plan.across_workers) total = r.all_reduce_on_host("all_reduce", {{total}}, "sum", nullptr)[0][0];
  r.global_batch = total;
  r.examples = p.accumulate_gradients ? r.accumulated(total, kHost, std::string(kAccumulatorScope), "examples") : total;
  const double replicas = static_cast<double>(r.replicas * (r.plan.across_workers ? r.plan.worker.workers : 1));
  const graph::ValueRef per_replica = r.on(kHost, ops::div(b, total, r.on(kHost, ops::scalar_of(b, replicas, total))));
  divide_by(r, per_replica);
  const graph::ValueRef share = p.accumulate_gradients ? per_replica : r.on(kHost, ops::scalar_of(b, 1.0 / replicas, total));
  for (int replica = 0; replica < r.replicas; ++replica) {
    auto replica_scope = b.scope(ReplicaGraph::clone_name(replica, "batch_share"));
    scale_seed(r, replica, share);
  }
  return b.status();
}

}  // namespace

graph::Status weight_gradient_seeds(ReplicaGraph& r) {
  if (r.program.signature.loss_weight.valid()) return divide_by_the_batch_weight(r);
  graph::Builder& b = r.builder;
  const TrainingProgram& p = r.program;
  const graph::NodeId features = *p.graph.find(p.signature.features);
  const int64_t axis = r.classification.batch_axis[features];  // where the features carry the batch
  const graph::DType dtype = p.graph.type(p.signature.loss).dtype;
  // Replica r's share of the batch, on its device.
  const auto count_share = [&](int replica) {
    auto scope = b.scope(ReplicaGraph::clone_name(replica, "batch_share"));
    const graph::ValueRef share_of_batch = r.shares.at(features)[static_cast<size_t>(replica)];
    return r.on(replica, ops::cast(b, r.on(replica, ops::dim_size(b, share_of_batch, axis)), dtype));
  };
  std::vector<graph::ValueRef> local(static_cast<size_t>(r.replicas));
  if (r.plan.replicas_feed_their_batches) {  // first: the global batch is their sum
    for (int replica = 0; replica < r.replicas; ++replica) local[static_cast<size_t>(replica)] = count_share(replica);
  }
  {
    auto scope = b.scope("global_batch");
    if (r.plan.replicas_feed_their_batches) {  // no whole batch anywhere: the sum of the shares
      r.global_batch = local[0];
      for (int replica = 1; replica < r.replicas; ++replica) {
        r.global_batch = r.on(kHost, ops::add(b, r.global_batch, local[static_cast<size_t>(replica)]));
      }
    } else {
      r.global_batch = r.on(kHost, ops::cast(b, r.on(kHost, ops::dim_size(b, {r.copies[features][0], 0}, axis)), dtype));
    }
    if (r.plan.across_workers) {
      r.global_batch = r.all_reduce_on_host("all_reduce", {{r.global_batch}}, "sum", nullptr)[0][0];
    }
  }
  const bool accumulate = p.accumulate_gradients;
  r.sums_divided_on_host = r.plan.replicas_feed_their_batches && !accumulate;
  r.examples = accumulate ? r.accumulated(r.global_batch, kHost, std::string(kAccumulatorScope), "examples") : r.global_batch;
  for (int replica = 0; replica < r.replicas; ++replica) {
    const graph::ValueRef share = local[static_cast<size_t>(replica)].valid() ? local[static_cast<size_t>(replica)]
                                                                              : count_share(replica);
    auto scope = b.scope(ReplicaGraph::clone_name(replica, "batch_share"));
    scale_seed(r, replica, accumulate || r.sums_divided_on_host ? share : r.on(replica, ops::div(b, share, r.examples)));
  }
  return b.status();
}

}  // namespace mirra::strategies
