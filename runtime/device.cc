// DeviceSet construction and lookup.
#include "runtime/device.h"

#include <algorithm>

#include "runtime/cpu/caching_allocator.h"

namespace mirra::runtime {

DeviceSet DeviceSet::cpu(int count, int threads, std::shared_ptr<MemoryBudget> budget) {
  DeviceSet set;
  const int per_device = std::max(1, threads / std::max(count, 1));
  for (int i = 0; i < count; ++i) {
    const DeviceId id{DeviceKind::cpu, i};
    set.devices_.push_back(
        std::make_unique<Device>(id, std::make_shared<CachingAllocator>(id.to_string(), budget), per_device));
  }
  return set;
}

Device* DeviceSet::find(DeviceId id) const {
  for (const auto& device : devices_) {
    if (device->id() == id) return device.get();
  }
  return nullptr;
}

}  // namespace mirra::runtime
