// weight_gradient_seeds: each replica's seed of its gradients times its share of the batch.
#include "ops/ops.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

// Note [Batch shares]
// Replica r's gradients times b_r / B, summed over the replicas, are the gradient of the mean loss
// over the global batch B; a replica with no examples contributes exactly zero. Every gradient is
// linear in the seed autodiff started from, so replica r's seed is multiplied by b_r / B: one scalar
// product instead of a pass over every gradient. With accumulation the seed is multiplied by b_r and
// the gradients are divided by the examples since the last update (Note [Gradient accumulation]).

graph::Status weight_gradient_seeds(ReplicaGraph& r) {
  graph::Builder& b = r.builder;
  const TrainingProgram& p = r.program;
  const graph::NodeId features = *p.graph.find(p.signature.features);
  const graph::DType dtype = p.graph.type(p.signature.loss).dtype;
  {
    auto scope = b.scope("global_batch");
    r.global_batch = r.on(kHost, ops::cast(b, r.on(kHost, ops::dim_size(b, {r.copies[features][0], 0}, 0)), dtype));
    if (r.plan.across_workers) {
      r.global_batch = r.on(kHost, ops::all_reduce(b, {r.global_batch}, 1, "sum", r.plan.collective)[0]);
    }
  }
  const bool accumulate = p.accumulate_gradients;
  r.examples = accumulate ? r.accumulated(r.global_batch, kHost, std::string(kAccumulatorScope), "examples") : r.global_batch;
  for (int replica = 0; replica < r.replicas; ++replica) {
    auto scope = b.scope(ReplicaGraph::clone_name(replica, "batch_share"));
    const graph::ValueRef share_of_batch = r.shares.at(features)[static_cast<size_t>(replica)];
    const graph::ValueRef local = r.on(replica, ops::cast(b, r.on(replica, ops::dim_size(b, share_of_batch, 0)), dtype));
    const graph::ValueRef share = accumulate ? local : r.on(replica, ops::div(b, local, r.examples));
    const graph::ValueRef seed = r.copy_on(p.loss_gradient, replica);
    const graph::ValueRef scaled = r.on(replica, ops::mul(b, seed, share));
    // Every clone that reads the seed reads it scaled.
    for (graph::NodeId id = 0; id < r.copies_end; ++id) {
      for (graph::ValueRef& input : r.graph.mutable_node(id).inputs) {
        if (input == seed) input = scaled;
      }
    }
  }
  return b.status();
}

}  // namespace mirra::strategies
