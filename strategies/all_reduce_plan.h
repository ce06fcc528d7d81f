// AllReducePlan: where Mirrored sums each bucket of gradients, chosen from where its replicas' memory
// is (`all_reduce.implementation: auto`): where each replica's AllReduce rank runs, and which ranks
// meet as a group that shares one device's memory (the topology; the op is the same whatever it is).
// Replicas on logical devices of one physical device (GPU, or cpu_async, its model) share that
// device's memory, so their sum needs no copy:
//   - single:       one replica; its bucket stays on its device (a sum of one, in place).
//   - on_device:    every replica shares one device's memory: each rank runs on its replica's device,
//                   and the last to arrive reads every replica's buffer once and writes each its sum.
//   - peer:         one replica per device: the devices sum among themselves, a rank each holding its
//                   own bucket (NCCL between GPUs); with sharded optimizer state they reduce-scatter
//                   among themselves.
//   - hierarchical: several devices, some holding several replicas: each device's replicas are
//                   summed there (a group per device), the devices sum among themselves as peer does
//                   (a rank per device, on its leader), and each device's replicas read its total.
//   - host:         the replicas' buckets meet on the host (CPU replicas, whose memory is the host's;
//                   a mix of CPU and device replicas, or of GPUs and cpu_async devices; collectives
//                   across workers; central_storage; sharded optimizer state of replicas that
//                   share a device; an `implementation` other than auto: in_process, or a
//                   registered communicator, runtime/collectives/communicator_registry.h).
//
//   AllReducePlan plan = plan_all_reduce({{gpu, 0}, {gpu, 1}, {gpu, 2}, {gpu, 3}}, {.logical_gpus_per_gpu = 2});
//   // plan.path == hierarchical, plan.groups == {{0, 1}, {2, 3}}
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/device_id.h"

namespace mirra::strategies {

enum class AllReducePath { single, on_device, peer, hierarchical, host };

std::string_view all_reduce_path_name(AllReducePath path);

struct AllReducePlan {
  AllReducePath path = AllReducePath::host;
  // Replica indices by the memory they share, in order of their first replica; each group's first
  // replica is its leader, whose device sums the group and is its device's rank among the peers.
  std::vector<std::vector<int>> groups;
  std::string reason;  // why this path, in words ("every replica shares gpu:0's memory")
};

struct AllReduceContext {
  int logical_gpus_per_gpu = 1;
  std::string_view implementation = "auto";  // any other forces the host path
  bool across_workers = false;
  bool central_variables = false;  // central_storage: the gradients are summed where the variables are
  bool sharded_state = false;      // shard_optimizer_state: reduce-scattered, among the devices or on the host
};

// REQUIRES: `replicas` non-empty, distinct; context.logical_gpus_per_gpu >= 1.
AllReducePlan plan_all_reduce(const std::vector<graph::DeviceId>& replicas, const AllReduceContext& context);

// "hierarchical: gpu:0, gpu:1 | gpu:2, gpu:3 (summed on each device, then among the devices)"
std::string describe(const AllReducePlan& plan, const std::vector<graph::DeviceId>& replicas);

}  // namespace mirra::strategies
