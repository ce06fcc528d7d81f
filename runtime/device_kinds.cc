// The runtime's table of device kinds: the built-ins' specs, and those registered since.
#include "runtime/device_kinds.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "graph/check.h"
#include "runtime/device.h"

namespace mirra::runtime {

namespace {

using graph::DeviceKind;

// Specs by kind index; a slot is written once, whole, before it is published.
class SpecTable {
 public:
  static SpecTable& instance() {
    static SpecTable table;
    return table;
  }

  graph::Expected<DeviceKind> add(graph::DeviceKindTraits traits, DeviceKindSpec spec) {
    if (!spec.open) return graph::invalid_argument("device kind '" + traits.name + "': its spec says nothing of how to open a device");
    const std::lock_guard lock(mutex_);
    const graph::Expected<DeviceKind> kind = graph::register_device_kind(std::move(traits));
    if (kind.ok()) publish(*kind, std::move(spec));
    return kind;
  }

  const DeviceKindSpec* find(DeviceKind kind) const { return slots_[kind.index()].load(std::memory_order_acquire); }

 private:
  SpecTable() {
    publish(DeviceKind::cpu, cpu_device_kind());
    publish(DeviceKind::cpu_async, cpu_async_device_kind());
    publish(DeviceKind::gpu, gpu_device_kind());
  }

  void publish(DeviceKind kind, DeviceKindSpec spec) {
    owned_.push_back(std::make_unique<DeviceKindSpec>(std::move(spec)));
    slots_[kind.index()].store(owned_.back().get(), std::memory_order_release);
  }

  std::mutex mutex_;  // registrations, one at a time
  std::vector<std::unique_ptr<DeviceKindSpec>> owned_;
  std::array<std::atomic<const DeviceKindSpec*>, graph::kMaxDeviceKinds> slots_{};
};

}  // namespace

graph::Expected<DeviceKind> register_device_kind(graph::DeviceKindTraits traits, DeviceKindSpec spec) {
  return SpecTable::instance().add(std::move(traits), std::move(spec));
}

const DeviceKindSpec* find_device_kind_spec(DeviceKind kind) { return SpecTable::instance().find(kind); }

const DeviceKindSpec& device_kind_spec(DeviceKind kind) {
  const DeviceKindSpec* spec = find_device_kind_spec(kind);
  MIRRA_CHECK(spec != nullptr, "device kind '" + std::string(graph::device_kind_name(kind)) + "' has no runtime registration");
  return *spec;
}

graph::Expected<std::unique_ptr<Device>> open_device(const DeviceOpening& opening) {
  const DeviceKindSpec* spec = find_device_kind_spec(opening.id.kind);
  if (spec == nullptr) {
    return graph::unavailable(opening.id.to_string() + ": device kind '" + std::string(graph::device_kind_name(opening.id.kind)) +
                              "' is known to graphs but not registered with the runtime (runtime::register_device_kind)");
  }
  return spec->open(opening);
}

graph::Status check_available(graph::DeviceId id, int logical_per_physical) {
  const DeviceKindSpec* spec = find_device_kind_spec(id.kind);
  if (spec == nullptr) {
    return graph::unavailable(id.to_string() + ": device kind '" + std::string(graph::device_kind_name(id.kind)) +
                              "' is not registered with the runtime");
  }
  return spec->check_available ? spec->check_available(id, logical_per_physical) : graph::Status();
}

}  // namespace mirra::runtime
