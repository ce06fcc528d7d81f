// DeviceId: which device a node runs on ("cpu:0", "cpu_async:0", "gpu:1"), as a kind and an ordinal,
// and for a device of another process, its task ("/task:1/gpu:0").
// cpu devices run kernels inline in host memory; cpu_async devices run the same kernels on a stream
// of their own, in memory of their own (runtime/device.h), the way a GPU does.
//
// Logical devices: with k logical GPUs per GPU, gpu:<i> is a stream of its own on physical GPU i / k,
// in that GPU's memory, which it shares with the other logical GPUs there (as TensorFlow's logical
// devices). cpu_async devices, the GPU's model, split the same way; cpu devices all share the host.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include "graph/device_kind.h"
#include "graph/status.h"

namespace mirra::graph {

struct DeviceId {
  DeviceKind kind = DeviceKind::cpu;
  int ordinal = 0;
  // The process it belongs to (TensorFlow's task: a worker's rank), or none: the process that runs
  // the graph. A session takes its own task's devices as its own (SessionOptions::task).
  std::optional<int> task;

  // "cpu:0", "/task:1/gpu:0"
  std::string to_string() const;
  // Parses "cpu:0", "cpu_async:2" or "gpu:1" (also "cuda:1"), or a registered kind's devices, each
  // maybe after "/task:N/"; a kind alone means ordinal 0.
  static Expected<DeviceId> parse(std::string_view text);

  friend auto operator<=>(const DeviceId&, const DeviceId&) = default;
};

// `id` as a device of the process that is task `task`: without its task when it is that one.
inline DeviceId local(DeviceId id, int task) {
  if (id.task == task) id.task.reset();
  return id;
}

// The physical device that logical device `id` runs on, with `logical_per_physical` logical devices
// per physical one: ordinal / k for gpu and cpu_async, 0 (the host) for cpu.
int physical_ordinal(DeviceId id, int logical_per_physical);
// The first logical device of `id`'s physical device, which names the memory they share.
DeviceId memory_owner(DeviceId id, int logical_per_physical);

}  // namespace mirra::graph
