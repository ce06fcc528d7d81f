// DeviceSet construction and lookup.
#include "runtime/device.h"

#include "runtime/cpu/caching_allocator.h"

namespace mirra::runtime {

DeviceSet DeviceSet::cpu(int count) {
  DeviceSet set;
  for (int i = 0; i < count; ++i) {
    const DeviceId id{DeviceKind::cpu, i};
    set.devices_.push_back(std::make_unique<Device>(id, std::make_shared<CachingAllocator>(id.to_string())));
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
