// The choice of where Mirrored's gradient buckets are summed, from the replicas' memory spaces.
#include "strategies/all_reduce_plan.h"

#include <algorithm>

#include "runtime/device_kinds.h"

namespace mirra::strategies {

std::string_view all_reduce_path_name(AllReducePath path) {
  switch (path) {
    case AllReducePath::single: return "single";
    case AllReducePath::on_device: return "on_device";
    case AllReducePath::peer: return "peer";
    case AllReducePath::hierarchical: return "hierarchical";
    case AllReducePath::host: return "host";
  }
  return "unknown";
}

namespace {

using graph::DeviceId;
using graph::DeviceKind;

// Replica indices grouped by the memory they share (CPU replicas: each its own group).
std::vector<std::vector<int>> memory_groups(const std::vector<DeviceId>& replicas, int logical_per_physical) {
  std::vector<std::vector<int>> groups;
  std::vector<DeviceId> owners;
  for (int r = 0; r < static_cast<int>(replicas.size()); ++r) {
    const DeviceId owner = graph::memory_owner(replicas[static_cast<size_t>(r)], logical_per_physical);
    const auto found = std::find(owners.begin(), owners.end(), owner);
    if (found != owners.end() && graph::has_own_memory(owner.kind)) {
      groups[static_cast<size_t>(found - owners.begin())].push_back(r);
    } else {
      owners.push_back(owner);
      groups.push_back({r});
    }
  }
  return groups;
}

}  // namespace

AllReducePlan plan_all_reduce(const std::vector<DeviceId>& replicas, const AllReduceContext& context) {
  AllReducePlan plan{.groups = memory_groups(replicas, context.logical_gpus_per_gpu)};
  const auto on_the_host = [&](std::string reason) {
    plan.path = AllReducePath::host;
    plan.reason = std::move(reason);
    return plan;
  };
  if (context.central_variables) return on_the_host("central_storage sums the gradients where the variables are");
  if (context.across_workers) return on_the_host("the collectives span worker processes");
  if (replicas.size() == 1) {
    plan.path = AllReducePath::single;
    plan.reason = "one replica: its sum is its own gradient, in place";
    return plan;
  }
  if (context.implementation != "auto") {  // in_process, or a registered communicator: the host's memory
    return on_the_host("all_reduce.implementation is " + std::string(context.implementation));
  }
  const DeviceKind kind = replicas.front().kind;
  if (!graph::has_own_memory(kind) ||
      std::any_of(replicas.begin(), replicas.end(), [&](const DeviceId& d) { return d.kind != kind; })) {
    const bool all_cpu = std::none_of(replicas.begin(), replicas.end(),
                                      [](const DeviceId& d) { return graph::has_own_memory(d.kind); });
    return on_the_host(all_cpu ? "CPU replicas live in host memory" : "replicas of different kinds meet in host memory");
  }
  const bool shared = std::any_of(plan.groups.begin(), plan.groups.end(), [](const auto& g) { return g.size() > 1; });
  const runtime::DeviceKindSpec* spec = runtime::find_device_kind_spec(kind);
  const std::string among = spec != nullptr && !spec->peer_communicator.empty()
                                ? spec->peer_communicator
                                : "the in-process collective, staged through the host";
  if (context.sharded_state) {
    if (shared) return on_the_host("sharded optimizer state of replicas that share a device: reduce-scattered on the host");
    plan.path = AllReducePath::peer;
    plan.reason = "sharded optimizer state: the devices reduce-scatter among themselves: " + among;
    return plan;
  }
  if (plan.groups.size() == 1) {
    plan.path = AllReducePath::on_device;
    plan.reason = "every replica shares " + replicas.front().to_string() + "'s memory";
    return plan;
  }
  plan.path = shared ? AllReducePath::hierarchical : AllReducePath::peer;
  plan.reason = shared ? "summed on each device, then among the devices: " + among
                       : "the devices sum among themselves: " + among;
  return plan;
}

std::string describe(const AllReducePlan& plan, const std::vector<DeviceId>& replicas) {
  std::string text(all_reduce_path_name(plan.path));
  text += ":";
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    text += g == 0 ? " " : " | ";
    for (size_t i = 0; i < plan.groups[g].size(); ++i) {
      text += (i ? ", " : "") + replicas[static_cast<size_t>(plan.groups[g][i])].to_string();
    }
  }
  return text + " (" + plan.reason + ")";
}

}  // namespace mirra::strategies
