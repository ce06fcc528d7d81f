// Memory spaces: names and the current thread's permissions.
#include "runtime/memory_space.h"

namespace mirra::runtime {

std::string MemorySpace::to_string() const { return host ? "host memory" : device.to_string() + " memory"; }

ScopedMemoryAccess::ScopedMemoryAccess(const MemoryAccess& access)
    : previous_space_(detail::t_device_space), previous_host_(detail::t_host_too) {
  detail::t_device_space = access.device_space;
  detail::t_host_too = access.host_too;
}

ScopedMemoryAccess::~ScopedMemoryAccess() {
  detail::t_device_space = previous_space_;
  detail::t_host_too = previous_host_;
}

}  // namespace mirra::runtime
