// The on-device all-reduce benchmark: AllReduce(SUM) over N logical devices of one GPU (or of one
// cpu_async device, its model), whose buffers share that device's memory, as Mirrored sums logical
// GPUs' gradients (AllReducePath::on_device): one kernel reads every replica's buffer once and
// writes each replica its sum. Held against the device's copy rate measured in the same run (a GPU's
// device-to-device cudaMemcpy; for cpu_async, the host's in-place streaming rate): the bound is
// 2 x N x size bytes at that rate. Each replica's buffer is made on its device by Fill, so no host
// copy enters the timing: the all-reduce's time is the step with it less the step of the fills alone.
//
//   auto json = run_on_device_all_reduce({.kind = graph::DeviceKind::gpu, .replicas = {2, 4}});
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "graph/device_id.h"
#include "graph/status.h"

namespace mirra::bench {

struct OnDeviceAllReduceOptions {
  graph::DeviceKind kind = graph::DeviceKind::gpu;  // gpu or cpu_async
  std::vector<int> replicas = {2, 4};
  std::vector<int64_t> sizes_mib = {1, 4, 16, 64, 256};
  int threads = 2;
  int repetitions = 5;  // the best is reported
};

// Unavailable when the device cannot be opened (no GPU, a build without CUDA).
graph::Expected<nlohmann::json> run_on_device_all_reduce(const OnDeviceAllReduceOptions& options);

}  // namespace mirra::bench
