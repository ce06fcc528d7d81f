// Device kinds registered by tests, as a backend outside the tree registers one: stream devices in
// memory of their own (cpu_async's devices, under the test's kind), opened through
// runtime::register_device_kind, each kind registered once per process.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/device.h"
#include "runtime/device_kinds.h"

namespace mirra::test {

// Devices opened by stream_device_kind's kinds so far.
inline std::atomic<int> stream_devices_opened = 0;

// A backend reusing a device implementation it has: cpu_async's stream devices, under its own kind.
inline graph::Expected<std::unique_ptr<runtime::Device>> open_stream_device(const runtime::DeviceOpening& o) {
  ++stream_devices_opened;
  static const runtime::DeviceKindSpec stream_devices = runtime::cpu_async_device_kind();
  return stream_devices.open(o);
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
