// DeviceId parsing and formatting.
#include "graph/device_id.h"

#include <charconv>

namespace mirra::graph {

int physical_ordinal(DeviceId id, int logical_per_physical) {
  return has_own_memory(id.kind) ? id.ordinal / logical_per_physical : 0;
}

DeviceId memory_owner(DeviceId id, int logical_per_physical) {
  if (!has_own_memory(id.kind)) return id;
  return {id.kind, physical_ordinal(id, logical_per_physical) * logical_per_physical, id.task};
}

std::string DeviceId::to_string() const {
  const std::string local = std::string(device_kind_name(kind)) + ":" + std::to_string(ordinal);
  return task ? "/task:" + std::to_string(*task) + "/" + local : local;
}

namespace {

// A non-negative integer of at most `most`, the whole of `text`.
std::optional<int> parse_number(std::string_view text, int most) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0 || value > most) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

Expected<DeviceId> DeviceId::parse(std::string_view whole) {
  std::string_view text = whole;
  std::optional<int> task;
  if (constexpr std::string_view prefix = "/task:"; text.starts_with(prefix)) {
    const size_t slash = text.find('/', prefix.size());
    task = slash == std::string_view::npos ? std::nullopt : parse_number(text.substr(prefix.size(), slash - prefix.size()), 65535);
    if (!task) {
      return invalid_argument("device '" + std::string(whole) + "': a task is written /task:N/ with N in [0, 65535], then the device");
    }
    text = text.substr(slash + 1);
  }
  const auto colon = text.find(':');
  const std::string_view kind_text = text.substr(0, colon);
  DeviceId id;
  id.task = task;
  const std::optional<DeviceKind> kind = find_device_kind(kind_text);
  if (!kind) return invalid_argument("device '" + std::string(whole) + "': kind must be one of " + device_kind_list());
  id.kind = *kind;
  if (colon == std::string_view::npos) return id;
  const std::optional<int> ordinal = parse_number(text.substr(colon + 1), 4095);
  if (!ordinal) return invalid_argument("device '" + std::string(whole) + "': ordinal must be an integer in [0, 4095]");
  id.ordinal = *ordinal;
  return id;
}

}  // namespace mirra::graph
