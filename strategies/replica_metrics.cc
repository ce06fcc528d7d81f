// report_metrics: the loss, correct count and metrics of the global batch, from the replicas' (and
// workers') sums.
#include "ops/ops.h"
#include "strategies/batch_mean_loss.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

using graph::ValueRef;

// Replica r's count of the elements of `value` (an original value), in its dtype.
ValueRef element_count(ReplicaGraph& r, ValueRef value, int replica) {
  graph::Builder& b = r.builder;
  const graph::Shape& shape = r.program.graph.type(value).shape;
  const graph::DType dtype = r.program.graph.type(value).dtype;
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

// A mean over the batch (the loss, or a metric of reduction mean): the node it is built around, the
// weight it divides by (invalid: the elements it averages), and the sum and count of the global batch
// as they are being built.
struct Mean {
  graph::NodeId node;
  ValueRef weight;
  ValueRef sum, count;
};

// Replica r's sum and count of `mean`, added to those of the replicas before it.
void add_replica(ReplicaGraph& r, Mean& mean, int replica) {
  graph::Builder& b = r.builder;
  const ValueRef averaged = r.program.graph.node(mean.node).inputs[0];  // or, with a weight, the sum divided
  const ValueRef sum =
      mean.weight.valid() ? r.copy_on(averaged, replica) : r.on(replica, ops::reduce_sum(b, r.copy_on(averaged, replica)));
  const ValueRef count = mean.weight.valid() ? r.copy_on(mean.weight, replica) : element_count(r, averaged, replica);
  mean.sum = replica == 0 ? sum : r.on(kHost, ops::add(b, mean.sum, sum));
  mean.count = replica == 0 ? count : r.on(kHost, ops::add(b, mean.count, count));
}

// `value` of the global batch on the host: `mean`'s node replaced by the global sum over the global
// count, and the rest built again around it (its terms that do not depend on the batch read replica
// 0's copies, which every replica holds alike).
ValueRef global_mean(ReplicaGraph& r, const Mean& mean, ValueRef value) {
  const ValueRef global = r.on(kHost, ops::div(r.builder, mean.sum, mean.count));
  return rebuild_loss(
      r.builder, r.program.graph, value, mean.node, global, r.classification.from_batch,
      [&](ValueRef term) { return r.copy_on(term, 0); }, [&](ValueRef v) { return r.on(kHost, v); });
}

// The sum over the replicas of each one's copy of `value`, on the host.
ValueRef replica_sum(ReplicaGraph& r, ValueRef value) {
  ValueRef sum = r.copy_on(value, 0);
  for (int replica = 1; replica < r.replicas; ++replica) sum = r.on(kHost, ops::add(r.builder, sum, r.copy_on(value, replica)));
  return sum;
}

}  // namespace

// The loss, correct count and metrics of the global batch on the host: a mean from the sum over the
// replicas (and workers) of each one's summed elements over the elements they average (or over the sum
// of their weights), in place of its batch mean in the one-replica program; a sum summed. A metric
// that does not depend on the batch is replica 0's (every replica's is the same).
graph::Status report_metrics(ReplicaGraph& r) {
  const TrainingProgram& p = r.program;
  graph::Builder& b = r.builder;
  auto scope = b.scope("metrics");
  Mean loss{r.batch_mean, p.signature.loss_weight};
  ValueRef correct;  // a classifier's count; none for other objectives
  for (int replica = 0; replica < r.replicas; ++replica) {
    add_replica(r, loss, replica);
    if (!p.signature.correct.valid()) continue;
    const ValueRef replica_correct = r.copy_on(p.signature.correct, replica);
    correct = replica == 0 ? replica_correct : r.on(kHost, ops::add(b, correct, replica_correct));
  }
  // The metrics' means and sums (an invalid node: one that does not depend on the batch).
  std::vector<Mean> means;
  std::vector<ValueRef> sums;
  for (const runtime::training::TrainingMetric& metric : p.signature.metrics) {
    Mean mean{graph::kInvalidNode, metric.weight};
    ValueRef sum;
    if (r.classification.from_batch[metric.value.node]) {
      if (metric.reduction == runtime::training::MetricReduction::sum) {
        sum = replica_sum(r, metric.value);
      } else {
        MIRRA_ASSIGN_OR_RETURN(mean.node, batch_mean_of(p.graph, *p.ops, metric.value, r.classification.from_batch, metric.weight));
        for (int replica = 0; replica < r.replicas; ++replica) add_replica(r, mean, replica);
      }
    }
    means.push_back(mean);
    sums.push_back(sum);
  }
  if (r.plan.across_workers) {
    std::vector<ValueRef> parts = {loss.sum, loss.count};
    if (correct.valid()) parts.push_back(correct);
    for (size_t i = 0; i < means.size(); ++i) {
      if (means[i].sum.valid()) parts.insert(parts.end(), {means[i].sum, means[i].count});
      if (sums[i].valid()) parts.push_back(sums[i]);
    }
    const std::vector<ValueRef> reduced = r.all_reduce_on_host("all_reduce", {parts}, "sum", nullptr)[0];
    size_t next = 0;
    loss.sum = reduced[next++];
    loss.count = reduced[next++];
    if (correct.valid()) correct = reduced[next++];
    for (size_t i = 0; i < means.size(); ++i) {
      if (means[i].sum.valid()) {
        means[i].sum = reduced[next++];
        means[i].count = reduced[next++];
      }
      if (sums[i].valid()) sums[i] = reduced[next++];
    }
  }
  r.result.signature.loss = global_mean(r, loss, p.signature.loss);
  r.result.signature.correct = correct;
  r.result.signature.loss_weight = loss.weight.valid() ? loss.count : ValueRef{};  // the whole batch's
  r.result.signature.metrics.clear();
  for (size_t i = 0; i < means.size(); ++i) {
    runtime::training::TrainingMetric metric = p.signature.metrics[i];
    metric.value = means[i].sum.valid() ? global_mean(r, means[i], metric.value)
                   : sums[i].valid()    ? sums[i]
                                        : r.copy_on(metric.value, 0);
    metric.weight = means[i].sum.valid() && means[i].weight.valid() ? means[i].count : ValueRef{};
    r.result.signature.metrics.push_back(std::move(metric));
  }
  return b.status();
}

}  // namespace mirra::strategies
