// report_metrics: the loss and correct count of the global batch, from the replicas' (and workers')
// sums.
#include "ops/ops.h"
#include "strategies/batch_mean_loss.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

using graph::ValueRef;

// Replica r's count of the elements of `value` (an original value), in the loss's dtype.
ValueRef element_count(ReplicaGraph& r, ValueRef value, int replica) {
  graph::Builder& b = r.builder;
  const graph::Shape& shape = r.program.graph.type(value).shape;
  const graph::DType dtype = r.program.graph.type(r.program.signature.loss).dtype;
  const ValueRef copy = r.copy_on(value, replica);
  ValueRef count;      // the product of the dims known at run time (none yet)
  int64_t known = 1;   // of those known here
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape.dim(d) >= 0) {
      known *= shape.dim(d);
      continue;
    }
    const ValueRef dim = r.on(replica, ops::cast(b, r.on(replica, ops::dim_size(b, copy, d)), dtype));
    count = count.valid() ? r.on(replica, ops::mul(b, count, dim)) : dim;
  }
  if (known == 1 && count.valid()) return count;
  const ValueRef constant = r.on(replica, ops::scalar_of(b, static_cast<double>(known), copy));
  return count.valid() ? r.on(replica, ops::mul(b, count, constant)) : constant;
}

}  // namespace

// The metrics of the global batch on the host: the sum over the replicas (and workers) of each one's
// summed losses, divided by the elements they average (or by the sum of their loss weights), in place of the one-replica loss's batch mean
// (the rest of the loss built around it again: its terms that do not depend on the batch read
// replica 0's copies, which every replica holds alike); the correct counts summed.
graph::Status report_metrics(ReplicaGraph& r) {
  const TrainingProgram& p = r.program;
  graph::Builder& b = r.builder;
  const ValueRef averaged = p.graph.node(r.batch_mean).inputs[0];  // or, with a loss weight, the sum divided
  const bool weighted = p.signature.loss_weight.valid();
  auto scope = b.scope("metrics");
  ValueRef loss_sum, count, correct;
  for (int replica = 0; replica < r.replicas; ++replica) {
    const ValueRef replica_loss =
        weighted ? r.copy_on(averaged, replica) : r.on(replica, ops::reduce_sum(b, r.copy_on(averaged, replica)));
    const ValueRef replica_count = weighted ? r.copy_on(p.signature.loss_weight, replica) : element_count(r, averaged, replica);
    const ValueRef replica_correct = r.copy_on(p.signature.correct, replica);
    loss_sum = replica == 0 ? replica_loss : r.on(kHost, ops::add(b, loss_sum, replica_loss));
    count = replica == 0 ? replica_count : r.on(kHost, ops::add(b, count, replica_count));
    correct = replica == 0 ? replica_correct : r.on(kHost, ops::add(b, correct, replica_correct));
  }
  if (r.plan.across_workers) {
    const std::vector<ValueRef> sums = ops::all_reduce(b, {loss_sum, count, correct}, 1, "sum", r.plan.collective);
    loss_sum = r.on(kHost, sums[0]);
    count = sums[1];
    correct = sums[2];
  }
  const ValueRef mean = r.on(kHost, ops::div(b, loss_sum, count));
  r.result.signature.loss = rebuild_loss(
      b, p.graph, p.signature.loss, r.batch_mean, mean, r.classification.from_batch,
      [&](ValueRef term) { return r.copy_on(term, 0); }, [&](ValueRef value) { return r.on(kHost, value); });
  r.result.signature.correct = correct;
  r.result.signature.loss_weight = weighted ? count : ValueRef{};  // the whole batch's
  return b.status();
}

}  // namespace mirra::strategies
