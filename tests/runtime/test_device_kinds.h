// Device kinds registered by tests, as a backend outside the tree registers one: stream devices in
// memory of their own (the cpu_async model), opened through runtime::register_device_kind, each kind
// registered once per process.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/cpu/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/device_kinds.h"

namespace mirra::test {

// Devices opened by stream_device_kind's kinds so far.
inline std::atomic<int> stream_devices_opened = 0;

inline graph::Expected<std::unique_ptr<runtime::Device>> open_stream_device(const runtime::DeviceOpening& o) {
  ++stream_devices_opened;
  auto stream = std::make_shared<runtime::WorkerStream>(o.id.to_string());
  const auto space = runtime::MemorySpace::of_device(graph::memory_owner(o.id, o.options.logical_gpus_per_gpu));
  auto allocator = std::make_shared<runtime::CachingAllocator>(o.id.to_string(), o.budget, space, stream);
  return std::make_unique<runtime::Device>(o.id, std::move(allocator), std::move(stream), o.intra_op_threads,
                                           std::make_shared<runtime::WorkerStream>(o.id.to_string() + " communication"));
}

// The kind `name` (also spelled as `alias`, when given) of stream devices that run the kernels of
// `runs_kernels_of` (none: only kernels registered for it), registered the first time it is asked for.
inline graph::DeviceKind stream_device_kind(const std::string& name, std::optional<graph::DeviceKind> runs_kernels_of,
                                            const std::string& alias = "") {
  static std::mutex mutex;
  static std::map<std::string, graph::DeviceKind> kinds;
  const std::lock_guard lock(mutex);
  if (auto it = kinds.find(name); it != kinds.end()) return it->second;
  graph::Expected<graph::DeviceKind> kind = runtime::register_device_kind(
      {.name = name, .aliases = alias.empty() ? std::vector<std::string>{} : std::vector<std::string>{alias}, .own_memory = true},
      {.open = open_stream_device, .runs_kernels_of = runs_kernels_of});
  MIRRA_CHECK(kind.ok(), kind.status().to_string());
  return kinds.emplace(name, *kind).first->second;
}

}  // namespace mirra::test
