// DeviceId: which device a node runs on ("cpu:0", "cuda:1"), as a kind and an ordinal.
#pragma once

#include <compare>
#include <string>
#include <string_view>

#include "graph/status.h"

namespace mirra::graph {

enum class DeviceKind : uint8_t { cpu, cuda };

struct DeviceId {
  DeviceKind kind = DeviceKind::cpu;
  int ordinal = 0;

  // "cpu:0"
  std::string to_string() const;
  // Parses "cpu:0" or "cuda:1"; "cpu" alone means ordinal 0.
  static Expected<DeviceId> parse(std::string_view text);

  friend auto operator<=>(const DeviceId&, const DeviceId&) = default;
};

std::string_view device_kind_name(DeviceKind kind);

}  // namespace mirra::graph
