// DeviceId parsing and formatting.
#include "graph/device_id.h"

#include <charconv>

namespace mirra::graph {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::cpu_async: return "cpu_async";
  }
  return "unknown";
}

bool has_own_memory(DeviceKind kind) { return kind != DeviceKind::cpu; }

int physical_ordinal(DeviceId id, int logical_per_physical) {
  return has_own_memory(id.kind) ? id.ordinal / logical_per_physical : 0;
}

DeviceId memory_owner(DeviceId id, int logical_per_physical) {
  if (!has_own_memory(id.kind)) return id;
  return {id.kind, physical_ordinal(id, logical_per_physical) * logical_per_physical};
}

std::string DeviceId::to_string() const {
  return std::string(device_kind_name(kind)) + ":" + std::to_string(ordinal);
}

Expected<DeviceId> DeviceId::parse(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view kind_text = text.substr(0, colon);
  DeviceId id;
  if (kind_text == "cpu") {
    id.kind = DeviceKind::cpu;
  } else if (kind_text == "cpu_async") {
    id.kind = DeviceKind::cpu_async;
  } else if (kind_text == "cuda" || kind_text == "gpu") {
    id.kind = DeviceKind::gpu;
  } else {
    return invalid_argument("device '" + std::string(text) + "': kind must be 'cpu', 'cpu_async' or 'gpu' (also 'cuda')");
  }
  if (colon == std::string_view::npos) return id;
  const std::string_view number = text.substr(colon + 1);
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), id.ordinal);
  if (number.empty() || error != std::errc() || end != number.data() + number.size() || id.ordinal < 0 ||
      id.ordinal > 4095) {
    return invalid_argument("device '" + std::string(text) + "': ordinal must be an integer in [0, 4095]");
  }
  return id;
}

}  // namespace mirra::graph
