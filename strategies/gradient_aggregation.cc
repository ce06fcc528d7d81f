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

// CentralStorage: a chain of Adds per gradient on the host; aggregated[j] = {the sum}, divided there by
// the global batch where the replicas feed their own batches (Note [Batch shares]).
std::vector<std::vector<ValueRef>> central_sums(ReplicaGraph& r, const std::vector<std::vector<ValueRef>>& scaled) {
  std::vector<std::vector<ValueRef>> aggregated(scaled.size());
  for (size_t j = 0; j < scaled.size(); ++j) {
    auto scope = r.builder.scope("reduce/" + r.program.graph.node(r.program.variables_and_gradients[j].first.node).name);
    ValueRef sum = scaled[j][0];
    for (int replica = 1; replica < r.replicas; ++replica) {
      sum = r.on(kHost, ops::add(r.builder, sum, scaled[j][static_cast<size_t>(replica)]));
    }
    aggregated[j] = {r.sums_divided_on_host ? r.on(kHost, ops::div(r.builder, sum, r.examples)) : sum};
  }
  return aggregated;
}

// One bucket's sum for every replica (`values` and the result: replica r's j-th tensor at r * k + j),
// where plan.reduction says (strategies/all_reduce_plan.h): every replica's rank of all-reduce
// `group` on the host; or, for replicas sharing one device's memory, each on its replica's device,
// summed where the buffers are; or, for several devices, each device's replicas summed there (a group
// per device) and the devices summing among themselves, a rank each on its leader replica's device.
// Each rank node is chained on its replica's lane of `order`. Empty on error.
std::vector<ValueRef> reduce_bucket(ReplicaGraph& r, const std::vector<ValueRef>& values, size_t k, const std::string& group,
                                    CollectiveOrder& order) {
  graph::Builder& b = r.builder;
  const AllReducePlan& reduction = r.plan.reduction;
  const auto bucket_of = [&](int replica) {
    return std::vector<ValueRef>(values.begin() + replica * static_cast<std::ptrdiff_t>(k),
                                 values.begin() + (replica + 1) * static_cast<std::ptrdiff_t>(k));
  };
  // Replica `replica`'s rank `rank` of `ranks` in `name`, on its device (on the host with `host`),
  // over `bucket`, chained on the replica's lane.
  const auto rank_node = [&](const std::string& name, int64_t rank, int64_t ranks, bool shared, bool host, int replica,
                             const std::vector<ValueRef>& bucket) {
    auto scope = b.scope("rank_" + std::to_string(rank));
    std::vector<ValueRef> sums =
        ops::all_reduce(b, bucket, {.group = name, .rank = rank, .ranks = ranks, .shared_memory = shared}, "sum", r.plan.collective);
    if (sums.front().valid()) order.chain(r.graph, r.collective_on(host ? kHost : replica, sums.front()).node, static_cast<size_t>(replica));
    return sums;
  };
  std::vector<ValueRef> reduced(values.size());
  const bool peers = reduction.path == AllReducePath::peer || reduction.path == AllReducePath::hierarchical;
  if (!peers) {
    // A single replica's bucket stays on its device (the sum of one, in place); replicas sharing one
    // device's memory are summed on it; the rest meet on the host.
    const bool on_device = reduction.path == AllReducePath::on_device || (r.replicas == 1 && !r.plan.across_workers);
    for (int replica = 0; replica < r.replicas; ++replica) {
      const std::vector<ValueRef> sums = rank_node(group, replica, r.replicas, on_device, !on_device, replica, bucket_of(replica));
      if (!sums.front().valid()) return {};
      std::copy(sums.begin(), sums.end(), reduced.begin() + replica * static_cast<std::ptrdiff_t>(k));
    }
    return reduced;
  }
  // Each device's replicas are summed where they are (hierarchical: a shared-memory group per device),
  // then the devices sum among themselves, and every replica reads its device's total (one memory, no
  // copy).
  const int64_t devices = static_cast<int64_t>(reduction.groups.size());
  for (int64_t g = 0; g < devices; ++g) {
    const std::vector<int>& group_replicas = reduction.groups[static_cast<size_t>(g)];
    const int leader = group_replicas.front();
    std::vector<ValueRef> sums = bucket_of(leader);
    if (group_replicas.size() > 1) {
      auto scope = b.scope("device_" + std::to_string(g));
      const std::string local = group + "/device_" + std::to_string(g);
      const int64_t ranks = static_cast<int64_t>(group_replicas.size());
      for (int64_t rank = 0; rank < ranks; ++rank) {
        const int replica = group_replicas[static_cast<size_t>(rank)];
        std::vector<ValueRef> mine = rank_node(local, rank, ranks, true, false, replica, bucket_of(replica));
        if (!mine.front().valid()) return {};
        if (rank == 0) sums = std::move(mine);  // the leader's; the others' sums are read by no one
      }
    }
    const std::vector<ValueRef> totals = rank_node(group, g, devices, false, false, leader, sums);
    if (!totals.front().valid()) return {};
    for (int replica : group_replicas) std::copy(totals.begin(), totals.end(), reduced.begin() + replica * static_cast<std::ptrdiff_t>(k));
  }
  return reduced;
}

// Mirrored: one collective sum per bucket, buckets in the order gradients become ready (the backward
// pass finishes the last layers first), a small first bucket, chained by control edges; each gradient
// through the plan's hook. aggregated[j][r] is replica r's sum of gradient j.
std::vector<std::vector<ValueRef>> bucketed_sums(ReplicaGraph& r, const std::vector<std::vector<ValueRef>>& scaled) {
  std::vector<std::vector<ValueRef>> aggregated(scaled.size());
  const std::vector<std::vector<size_t>> buckets = fill_buckets(r.ready_order(), r.variable_bytes(), r.plan.buckets);
  CollectiveOrder issue_order;
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
