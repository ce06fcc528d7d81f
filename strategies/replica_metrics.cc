// report_metrics: the loss, correct count and metrics of the global batch, from the replicas' (and
// workers') sums; with ReplicationPlan::report_each_replica, each replica's own too.
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

// A sum over examples and what it is divided by.
struct Share {
  ValueRef sum, count;
};

// A mean over the batch (the loss, or a metric of reduction mean): the node it is built around, the
// weight it divides by (invalid: the elements it averages), each replica's sum and count, and the
// global batch's as they are being built.
struct Mean {
  graph::NodeId node;
  ValueRef weight;
  std::vector<Share> replicas;
  Share global;
};

// Replica r's sum and count of `mean`, added to those of the replicas before it.
void add_replica(ReplicaGraph& r, Mean& mean, int replica) {
  graph::Builder& b = r.builder;
  const ValueRef averaged = r.program.graph.node(mean.node).inputs[0];  // or, with a weight, the sum divided
  const ValueRef sum =
      mean.weight.valid() ? r.copy_on(averaged, replica) : r.on(replica, ops::reduce_sum(b, r.copy_on(averaged, replica)));
  const ValueRef count = mean.weight.valid() ? r.copy_on(mean.weight, replica) : element_count(r, averaged, replica);
  mean.replicas.push_back({sum, count});
  mean.global.sum = replica == 0 ? sum : r.on(kHost, ops::add(b, mean.global.sum, sum));
  mean.global.count = replica == 0 ? count : r.on(kHost, ops::add(b, mean.global.count, count));
}

// `value` over `share` on `device` (a replica, or kHost for the global batch): `mean`'s node replaced
// by the share's sum over its count, and the rest built again around it (its terms that do not depend
// on the batch read the device's replica's copies, replica 0's on the host: every replica holds them alike).
ValueRef mean_over(ReplicaGraph& r, const Mean& mean, const Share& share, ValueRef value, int device) {
  const ValueRef divided = r.on(device, ops::div(r.builder, share.sum, share.count));
  return rebuild_loss(
      r.builder, r.program.graph, value, mean.node, divided, r.classification.from_batch,
      [&](ValueRef term) { return r.copy_on(term, device == kHost ? 0 : device); }, [&](ValueRef v) { return r.on(device, v); });
}

// The sum over the replicas of each one's copy of `value`, on the host.
ValueRef replica_sum(ReplicaGraph& r, ValueRef value) {
  ValueRef sum = r.copy_on(value, 0);
  for (int replica = 1; replica < r.replicas; ++replica) sum = r.on(kHost, ops::add(r.builder, sum, r.copy_on(value, replica)));
  return sum;
}

// Each replica's own loss, correct count (`correct[r]`) and metrics on its device, each an Identity
// named replica_report_name of the global batch's value in `signature`, kept in result.reported.
graph::Status report_each_replica(ReplicaGraph& r, const runtime::training::TrainingGraph& signature, const Mean& loss,
                                  const std::vector<ValueRef>& correct, const std::vector<Mean>& means) {
  const TrainingProgram& p = r.program;
  graph::Builder& b = r.builder;
  for (int replica = 0; replica < r.replicas; ++replica) {
    const auto report = [&](ValueRef global, ValueRef own) -> graph::Status {
      if (!global.valid()) return graph::Status();
      const std::string name = replica_report_name(r.graph.node(global.node).name, replica);
      const ValueRef named = r.on(replica, b.add_value({.op = "Identity", .inputs = {own}, .name = name}));
      MIRRA_RETURN_IF_ERROR(b.status());
      if (r.graph.node(named.node).name != name) return graph::internal_error("replicate: the name '" + name + "' is taken");
      r.result.reported.push_back(named);
      return graph::Status();
    };
    const Share& own = loss.replicas[static_cast<size_t>(replica)];
    MIRRA_RETURN_IF_ERROR(report(signature.loss, mean_over(r, loss, own, p.signature.loss, replica)));
    if (!correct.empty()) MIRRA_RETURN_IF_ERROR(report(signature.correct, correct[static_cast<size_t>(replica)]));
    MIRRA_RETURN_IF_ERROR(report(signature.loss_weight, own.count));
    for (size_t i = 0; i < means.size(); ++i) {
      const runtime::training::TrainingMetric& metric = p.signature.metrics[i];
      const runtime::training::TrainingMetric& global = signature.metrics[i];
      if (!means[i].replicas.empty()) {
        const Share& share = means[i].replicas[static_cast<size_t>(replica)];
        MIRRA_RETURN_IF_ERROR(report(global.value, mean_over(r, means[i], share, metric.value, replica)));
        MIRRA_RETURN_IF_ERROR(report(global.weight, share.count));
      } else {
        MIRRA_RETURN_IF_ERROR(report(global.value, r.copy_on(metric.value, replica)));  // a sum, or no batch's
      }
    }
  }
  return b.status();
}

}  // namespace

std::string replica_report_name(std::string_view global, int replica) {
  return std::string(global) + "/of_replica_" + std::to_string(replica);
}

// The loss, correct count and metrics of the global batch on the host: a mean from the sum over the
// replicas (and workers) of each one's summed elements over the elements they average (or over the sum
// of their weights), in place of its batch mean in the one-replica program; a sum summed. A metric
// that does not depend on the batch is replica 0's (every replica's is the same).
graph::Status report_metrics(ReplicaGraph& r) {
  const TrainingProgram& p = r.program;
  graph::Builder& b = r.builder;
  Mean loss{r.batch_mean, p.signature.loss_weight};
  std::vector<ValueRef> replica_correct;  // a classifier's counts; none for other objectives
  ValueRef correct;
  std::vector<Mean> means;  // the metrics' (an invalid node: a sum, or one that does not depend on the batch)
  std::vector<ValueRef> sums;
  {
    auto scope = b.scope("metrics");
    for (int replica = 0; replica < r.replicas; ++replica) {
      add_replica(r, loss, replica);
      if (!p.signature.correct.valid()) continue;
      replica_correct.push_back(r.copy_on(p.signature.correct, replica));
      correct = replica == 0 ? replica_correct.back() : r.on(kHost, ops::add(b, correct, replica_correct.back()));
    }
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
      std::vector<ValueRef> parts = {loss.global.sum, loss.global.count};
      if (correct.valid()) parts.push_back(correct);
      for (size_t i = 0; i < means.size(); ++i) {
        if (means[i].global.sum.valid()) parts.insert(parts.end(), {means[i].global.sum, means[i].global.count});
        if (sums[i].valid()) parts.push_back(sums[i]);
      }
      const std::vector<ValueRef> reduced = r.all_reduce_on_host("all_reduce", {parts}, "sum", nullptr)[0];
      size_t next = 0;
      loss.global.sum = reduced[next++];
      loss.global.count = reduced[next++];
      if (correct.valid()) correct = reduced[next++];
      for (size_t i = 0; i < means.size(); ++i) {
        if (means[i].global.sum.valid()) {
          means[i].global.sum = reduced[next++];
          means[i].global.count = reduced[next++];
        }
        if (sums[i].valid()) sums[i] = reduced[next++];
      }
    }
    runtime::training::TrainingGraph& signature = r.result.signature;
    signature.loss = mean_over(r, loss, loss.global, p.signature.loss, kHost);
    signature.correct = correct;
    signature.loss_weight = loss.weight.valid() ? loss.global.count : ValueRef{};  // the whole batch's
    signature.metrics.clear();
    for (size_t i = 0; i < means.size(); ++i) {
      runtime::training::TrainingMetric metric = p.signature.metrics[i];
      metric.value = means[i].global.sum.valid() ? mean_over(r, means[i], means[i].global, metric.value, kHost)
                     : sums[i].valid()           ? sums[i]
                                                 : r.copy_on(metric.value, 0);
      metric.weight = means[i].global.sum.valid() && means[i].weight.valid() ? means[i].global.count : ValueRef{};
      signature.metrics.push_back(std::move(metric));
    }
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  if (!r.plan.report_each_replica) return graph::Status();
  return report_each_replica(r, r.result.signature, loss, replica_correct, means);
}

}  // namespace mirra::strategies
