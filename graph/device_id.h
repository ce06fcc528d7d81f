// DeviceId: which device a node runs on ("cpu:0", "cpu_async:0", "gpu:1"), as a kind and an ordinal.
// cpu devices run kernels inline in host memory; cpu_async devices run the same kernels on a stream
// of their own, in memory of their own (runtime/device.h), the way a GPU does.
#pragma once

#include <compare>
#include <string>
#include <string_view>

#include "graph/status.h"

namespace mirra::graph {

enum class DeviceKind : uint8_t { cpu, gpu, cpu_async };

struct DeviceId {
  DeviceKind kind = DeviceKind::cpu;
  int ordinal = 0;

  // "cpu:0"
  std::string to_string() const;
  // Parses "cpu:0", "cpu_async:2" or "gpu:1" (also "cuda:1"); a kind alone means ordinal 0.
  static Expected<DeviceId> parse(std::string_view text);

  friend auto operator<=>(const DeviceId&, const DeviceId&) = default;
};

std::string_view device_kind_name(DeviceKind kind);

}  // namespace mirra::graph
