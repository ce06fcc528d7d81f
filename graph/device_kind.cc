// The table of device kinds: the built-ins at fixed places, others appended by registration.
// Readers take no lock: a slot is written whole before the count that publishes it.
#include "graph/device_kind.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "graph/check.h"

namespace mirra::graph {

class DeviceKindTable {
 public:
  static DeviceKindTable& instance() {
    static DeviceKindTable table;
    return table;
  }

  Expected<DeviceKind> add(DeviceKindTraits traits) {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> names = traits.aliases;
    names.push_back(traits.name);
    for (const std::string& name : names) {
      if (!is_name(name)) {
        return invalid_argument("device kind '" + name + "': a kind is written as a name ([a-z][a-z0-9_]*)");
      }
      if (find(name)) return invalid_argument("device kind '" + name + "' is registered already");
    }
    const int count = count_.load(std::memory_order_relaxed);
    if (count == kMaxDeviceKinds) {
      return resource_exhausted("device kind '" + traits.name + "': the table holds " + std::to_string(kMaxDeviceKinds) +
                                " kinds and is full");
    }
    slots_[static_cast<size_t>(count)] = std::move(traits);
    count_.store(count + 1, std::memory_order_release);
    return DeviceKind(static_cast<uint8_t>(count));
  }

  std::optional<DeviceKind> find(std::string_view name) const {
    const int count = count_.load(std::memory_order_acquire);
    for (int i = 0; i < count; ++i) {
      const DeviceKindTraits& slot = slots_[static_cast<size_t>(i)];
      if (slot.name == name || std::find(slot.aliases.begin(), slot.aliases.end(), name) != slot.aliases.end()) {
        return DeviceKind(static_cast<uint8_t>(i));
      }
    }
    return std::nullopt;
  }

  std::vector<DeviceKind> kinds() const {
    std::vector<DeviceKind> kinds;
    const int count = count_.load(std::memory_order_acquire);
    for (int i = 0; i < count; ++i) kinds.push_back(DeviceKind(static_cast<uint8_t>(i)));
    return kinds;
  }

  const DeviceKindTraits& traits(DeviceKind kind) const {
    MIRRA_CHECK(kind.index() < count_.load(std::memory_order_acquire), "device kind " + std::to_string(kind.index()) + " was never registered");
    return slots_[kind.index()];
  }

 private:
  DeviceKindTable() {
    slots_[DeviceKind::cpu.index()] = {.name = "cpu"};
    slots_[DeviceKind::gpu.index()] = {.name = "gpu", .aliases = {"cuda"}, .own_memory = true};
    slots_[DeviceKind::cpu_async.index()] = {.name = "cpu_async", .own_memory = true};
    count_.store(3, std::memory_order_release);
  }

  static bool is_name(std::string_view name) {
    return !name.empty() && name.front() >= 'a' && name.front() <= 'z' &&
           std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
  }

  std::mutex mutex_;  // registrations, one at a time
  std::array<DeviceKindTraits, kMaxDeviceKinds> slots_;
  std::atomic<int> count_ = 0;
};

Expected<DeviceKind> register_device_kind(DeviceKindTraits traits) {
  return DeviceKindTable::instance().add(std::move(traits));
}

std::optional<DeviceKind> find_device_kind(std::string_view name) { return DeviceKindTable::instance().find(name); }

std::vector<DeviceKind> device_kinds() { return DeviceKindTable::instance().kinds(); }

std::string device_kind_list() {
  std::string text;
  for (DeviceKind kind : device_kinds()) {
    const DeviceKindTraits& traits = DeviceKindTable::instance().traits(kind);
    text += (text.empty() ? "'" : ", '") + traits.name + "'";
    for (size_t i = 0; i < traits.aliases.size(); ++i) text += (i ? ", '" : " (also '") + traits.aliases[i] + "'";
    if (!traits.aliases.empty()) text += ")";
  }
  return text;
}

std::string_view device_kind_name(DeviceKind kind) { return DeviceKindTable::instance().traits(kind).name; }

bool has_own_memory(DeviceKind kind) { return DeviceKindTable::instance().traits(kind).own_memory; }

}  // namespace mirra::graph
