// aggregate_gradients: Mirrored's bucketed collectives (through the plan's bucket hook, where its
// AllReducePlan puts them, in one fixed order) or CentralStorage's sums on the host, then every
// consumer of a raw replica gradient rewired to the aggregate.
#include <map>

#include "ops/ops.h"
#include "strategies/bucket_hooks.h"
#include "strategies/collective_order.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

using graph::NodeId;
using graph::ValueRef;

// CentralStorage: a chain of Adds per gradient on the host; aggregated[j] = {the sum}.
std::vector<std::vector<ValueRef>> central_sums(ReplicaGraph& r, const std::vector<std::vector<ValueRef>>& scaled) {
  std::vector<std::vector<ValueRef>> aggregated(scaled.size());
  for (size_t j = 0; j < scaled.size(); ++j) {
    auto scope = r.builder.scope("reduce/" + r.program.graph.node(r.program.variables_and_gradients[j].first.node).name);
    ValueRef sum = scaled[j][0];
    for (int replica = 1; replica < r.replicas; ++replica) {
      sum = r.on(kHost, ops::add(r.builder, sum, scaled[j][static_cast<size_t>(replica)]));
    }
    aggregated[j] = {sum};
  }
  return aggregated;
}

// One bucket's sum for every replica (`values` and the result: replica r's j-th tensor at r * k + j),
// where plan.reduction says (strategies/all_reduce_plan.h). The nodes that call a collective are
// chained in `order` (lanes by replica, the host's on lane 0). Empty on error.
std::vector<ValueRef> reduce_bucket(ReplicaGraph& r, const std::vector<ValueRef>& values, size_t k, const std::string& group,
                                    CollectiveOrder& order) {
  graph::Builder& b = r.builder;
  const auto chain = [&](ValueRef collective, int lane) { order.chain(r.graph, collective.node, static_cast<size_t>(lane)); };
  const AllReducePlan& reduction = r.plan.reduction;
  const bool peers = reduction.path == AllReducePath::peer || reduction.path == AllReducePath::hierarchical;
  if (!peers) {
    std::vector<ValueRef> reduced = ops::all_reduce(b, values, r.replicas, "sum", r.plan.collective);
    if (!reduced.front().valid()) return {};
    // A single replica's bucket stays on its device (the sum of one is in place); replicas sharing
    // one device's memory are summed on it; the rest meet on the host.
    r.on(kHost, reduced.front());
    if (reduction.path == AllReducePath::on_device || (r.replicas == 1 && !r.plan.across_workers)) {
      r.run_on_leader(reduced.front(), reduction.groups.empty() ? 0 : reduction.groups[0][0]);
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
    for (int replica : group_replicas) {
      sums.insert(sums.end(), values.begin() + replica * static_cast<std::ptrdiff_t>(k),
                  values.begin() + (replica + 1) * static_cast<std::ptrdiff_t>(k));
    }
    auto scope = b.scope("device_" + std::to_string(g));
    if (group_replicas.size() > 1) {
      sums = ops::all_reduce(b, sums, static_cast<int64_t>(group_replicas.size()), "sum", r.plan.collective);
      if (!sums.front().valid()) return {};
      r.on(kHost, sums.front());
      r.run_on_leader(sums.front(), leader);
      sums.resize(k);  // the leader's
    }
    std::vector<ValueRef> totals = ops::peer_all_reduce(b, sums, {.group = group, .rank = g, .ranks = devices}, "sum", r.plan.collective);
    if (!totals.front().valid()) return {};
    r.on(kHost, totals.front());
    r.run_on_leader(totals.front(), leader);
    chain(totals.front(), leader);
    for (int replica : group_replicas) {
      for (size_t j = 0; j < k; ++j) reduced[static_cast<size_t>(replica) * k + j] = totals[j];
    }
  }
  return reduced;
}

// Mirrored: one collective sum per bucket, buckets in the order gradients become ready (the backward
// pass finishes the last layers first), a small first bucket, chained by control edges; each gradient
// through the plan's hook. aggregated[j][r] is replica r's sum of gradient j.
std::vector<std::vector<ValueRef>> bucketed_sums(ReplicaGraph& r, const std::vector<std::vector<ValueRef>>& scaled) {
  std::vector<std::vector<ValueRef>> aggregated(scaled.size());
  const std::vector<std::vector<size_t>> buckets = fill_buckets(r.ready_order(), r.variable_bytes(), r.plan.buckets);
  CollectiveOrder issue_order(static_cast<size_t>(r.replicas));
  const BucketHook* hook = r.plan.bucket_hook.get();
  for (size_t k = 0; k < buckets.size(); ++k) {
    const size_t size = buckets[k].size();
    std::vector<ValueRef> gradients, values;
    for (int replica = 0; replica < r.replicas; ++replica) {
      for (size_t j : buckets[k]) gradients.push_back(scaled[j][static_cast<size_t>(replica)]);
    }
    const std::string group = "all_reduce/bucket_" + std::to_string(k);
    auto scope = r.builder.scope(group);
    for (size_t i = 0; i < gradients.size(); ++i) {
      values.push_back(hook != nullptr ? hook->before(r, gradients[i], static_cast<int>(i / size)) : gradients[i]);
    }
    std::vector<ValueRef> reduced = reduce_bucket(r, values, size, group, issue_order);
    if (reduced.empty()) return aggregated;
    for (size_t i = 0; i < reduced.size() && hook != nullptr; ++i) {
      reduced[i] = hook->after(r, reduced[i], gradients[i], static_cast<int>(i / size));
    }
    for (int replica = 0; replica < r.replicas; ++replica) {
      for (size_t i = 0; i < size; ++i) aggregated[buckets[k][i]].push_back(reduced[static_cast<size_t>(replica) * size + i]);
    }
  }
  return aggregated;
}

// Every clone that reads a replica's raw gradient reads the aggregate instead.
void rewire(ReplicaGraph& r, const std::vector<std::vector<ValueRef>>& raw) {
  std::map<ValueRef, size_t> gradient_index;
  for (size_t j = 0; j < raw.size(); ++j) {
    for (ValueRef value : raw[j]) gradient_index[value] = j;
  }
  for (NodeId id = 0; id < r.copies_end; ++id) {
    for (ValueRef& input : r.graph.mutable_node(id).inputs) {
      auto found = gradient_index.find(input);
      if (found == gradient_index.end()) continue;
      const std::vector<ValueRef>& sums = r.aggregated[found->second];
      input = sums.size() == 1 ? sums[0] : sums[static_cast<size_t>(std::max(r.replica_of(id), 0))];
    }
  }
}

}  // namespace

graph::Status aggregate_gradients(ReplicaGraph& r) {
  const std::vector<std::vector<ValueRef>> raw = r.raw_gradients();
  const std::vector<std::vector<ValueRef>> scaled = r.replica_gradients();
  MIRRA_RETURN_IF_ERROR(r.builder.status());
  r.aggregated = r.plan.mirror_state ? bucketed_sums(r, scaled) : central_sums(r, scaled);
  MIRRA_RETURN_IF_ERROR(r.builder.status());
  rewire(r, raw);
  return graph::Status();
}

}  // namespace mirra::strategies
