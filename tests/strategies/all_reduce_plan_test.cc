// Where Mirrored sums its gradient buckets, by device set: one replica in place, replicas sharing a
// device's memory (logical GPUs, logical cpu_async devices) on that device, one replica per device
// among the devices, several on some devices per device and then among the devices, everything else
// on the host; and the reasons the plan gives.
#include <doctest/doctest.h>

#include "strategies/all_reduce_plan.h"
#include "strategies/strategy.h"

namespace mirra::strategies {
namespace {

using graph::DeviceId;
using graph::DeviceKind;

std::vector<DeviceId> gpus(int n) {
  std::vector<DeviceId> devices;
  for (int i = 0; i < n; ++i) devices.push_back({DeviceKind::gpu, i});
  return devices;
}

TEST_CASE("AllReducePlan.one_replica_stays_in_place") {
  const AllReducePlan plan = plan_all_reduce({{DeviceKind::gpu, 3}}, {.logical_gpus_per_gpu = 2});
  CHECK(plan.path == AllReducePath::single);
  CHECK(plan.groups == std::vector<std::vector<int>>{{0}});
}

TEST_CASE("AllReducePlan.logical_gpus_of_one_gpu_sum_on_it") {
  const AllReducePlan plan = plan_all_reduce(gpus(4), {.logical_gpus_per_gpu = 4});
  CHECK(plan.path == AllReducePath::on_device);
  CHECK(plan.groups == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(describe(plan, gpus(4)) == "on_device: gpu:0, gpu:1, gpu:2, gpu:3 (every replica shares gpu:0's memory)");
}

TEST_CASE("AllReducePlan.several_gpus_with_shared_ones_are_hierarchical") {
  // gpu:0-1 on GPU 0, gpu:2-3 on GPU 1.
  const AllReducePlan even = plan_all_reduce(gpus(4), {.logical_gpus_per_gpu = 2});
  CHECK(even.path == AllReducePath::hierarchical);
  CHECK(even.groups == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(describe(even, gpus(4)) ==
        "hierarchical: gpu:0, gpu:1 | gpu:2, gpu:3 (summed on each device, then among the devices: nccl)");
  // Replicas in any order, one GPU holding one of them: groups follow the replicas' order.
  const std::vector<DeviceId> mixed = {{DeviceKind::gpu, 4}, {DeviceKind::gpu, 0}, {DeviceKind::gpu, 1}};
  const AllReducePlan uneven = plan_all_reduce(mixed, {.logical_gpus_per_gpu = 2});
  CHECK(uneven.path == AllReducePath::hierarchical);
  CHECK(uneven.groups == std::vector<std::vector<int>>{{0}, {1, 2}});
}

TEST_CASE("AllReducePlan.cpu_async_devices_split_as_gpus_do") {
  const std::vector<DeviceId> devices = {{DeviceKind::cpu_async, 0}, {DeviceKind::cpu_async, 1}, {DeviceKind::cpu_async, 2}};
  CHECK(plan_all_reduce(devices, {.logical_gpus_per_gpu = 3}).path == AllReducePath::on_device);
  CHECK(plan_all_reduce(devices, {.logical_gpus_per_gpu = 2}).path == AllReducePath::hierarchical);
  const AllReducePlan peers = plan_all_reduce(devices, {.logical_gpus_per_gpu = 1});
  CHECK(peers.path == AllReducePath::peer);
  CHECK(peers.reason == "the devices sum among themselves: the in-process collective, staged through the host");
}

TEST_CASE("AllReducePlan.one_replica_per_gpu_is_peer_to_peer") {
  const AllReducePlan plan = plan_all_reduce(gpus(3), {});
  CHECK(plan.path == AllReducePath::peer);
  CHECK(plan.groups == std::vector<std::vector<int>>{{0}, {1}, {2}});
  CHECK(describe(plan, gpus(3)) == "peer: gpu:0 | gpu:1 | gpu:2 (the devices sum among themselves: nccl)");
}

TEST_CASE("AllReducePlan.the_rest_meets_on_the_host") {
  const auto reason = [](const std::vector<DeviceId>& devices, const AllReduceContext& context) {
    const AllReducePlan plan = plan_all_reduce(devices, context);
    CHECK(plan.path == AllReducePath::host);
    return plan.reason;
  };
  const std::vector<DeviceId> cpus = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}};
  CHECK(reason(cpus, {.logical_gpus_per_gpu = 2}) == "CPU replicas live in host memory");
  CHECK(plan_all_reduce(cpus, {}).groups == std::vector<std::vector<int>>{{0}, {1}});
  CHECK(reason({{DeviceKind::cpu, 0}, {DeviceKind::gpu, 0}}, {}) == "replicas of different kinds meet in host memory");
  CHECK(reason({{DeviceKind::cpu_async, 0}, {DeviceKind::gpu, 0}}, {}) == "replicas of different kinds meet in host memory");
  CHECK(reason(gpus(2), {.logical_gpus_per_gpu = 2, .implementation = "in_process"}) ==
        "all_reduce.implementation is in_process");
  CHECK(reason(gpus(2), {.logical_gpus_per_gpu = 2, .across_workers = true}) == "the collectives span worker processes");
  CHECK(reason(gpus(2), {.logical_gpus_per_gpu = 2, .central_variables = true}) ==
        "central_storage sums the gradients where the variables are");
  CHECK(reason(gpus(2), {.logical_gpus_per_gpu = 2, .sharded_state = true}) ==
        "sharded optimizer state of replicas that share a device: reduce-scattered on the host");
  CHECK(reason(gpus(4), {.logical_gpus_per_gpu = 2, .sharded_state = true}) ==
        "sharded optimizer state of replicas that share a device: reduce-scattered on the host");
  CHECK(reason(cpus, {.sharded_state = true}) == "CPU replicas live in host memory");
}

// With sharded optimizer state, devices of one replica each reduce-scatter among themselves.
TEST_CASE("AllReducePlan.sharded_state_of_one_replica_per_device_is_peer_to_peer") {
  const AllReducePlan plan = plan_all_reduce(gpus(3), {.sharded_state = true});
  CHECK(plan.path == AllReducePath::peer);
  CHECK(plan.reason == "sharded optimizer state: the devices reduce-scatter among themselves: nccl");
  const std::vector<DeviceId> async = {{DeviceKind::cpu_async, 0}, {DeviceKind::cpu_async, 1}};
  CHECK(plan_all_reduce(async, {.sharded_state = true}).path == AllReducePath::peer);
}

TEST_CASE("AllReducePlan.strategies_report_theirs") {
  const std::vector<DeviceId> devices = {{DeviceKind::cpu_async, 0}, {DeviceKind::cpu_async, 1}};
  auto mirrored = make_strategy({.strategy = "mirrored", .devices = devices, .logical_gpus_per_gpu = 2});
  REQUIRE(mirrored.ok());
  CHECK((*mirrored)->all_reduce_plan().path == AllReducePath::on_device);
  auto central = make_strategy({.strategy = "central_storage", .devices = devices, .logical_gpus_per_gpu = 2});
  REQUIRE(central.ok());
  CHECK((*central)->all_reduce_plan().path == AllReducePath::host);
  auto one = make_strategy({.strategy = "one_device", .devices = {devices[0]}});
  REQUIRE(one.ok());
  CHECK((*one)->all_reduce_plan().path == AllReducePath::single);
}

}  // namespace
}  // namespace mirra::strategies
