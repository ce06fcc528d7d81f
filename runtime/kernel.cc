// KernelRegistry storage.
#include "runtime/kernel.h"

#include "runtime/device_kinds.h"

namespace mirra::runtime {

void KernelRegistry::add(std::string_view op, graph::DeviceKind kind, KernelDef def) {
  MIRRA_CHECK((def.fn != nullptr) != (def.async_fn != nullptr), "kernel needs exactly one function: " + std::string(op));
  const bool inserted = kernels_.emplace(std::pair{std::string(op), kind}, def).second;
  MIRRA_CHECK(inserted, "kernel registered twice: " + std::string(op));
}

void KernelRegistry::share(std::string_view op, graph::DeviceKind to, graph::DeviceKind from) {
  const KernelDef* kernel = find(op, from);
  MIRRA_CHECK(kernel != nullptr, "no kernel to share: " + std::string(op));
  add(op, to, *kernel);
}

const KernelDef* KernelRegistry::find(std::string_view op, graph::DeviceKind kind) const {
  if (auto it = kernels_.find(std::pair{std::string(op), kind}); it != kernels_.end()) return &it->second;
  const DeviceKindSpec* spec = find_device_kind_spec(kind);
  return spec != nullptr && spec->runs_kernels_of ? find(op, *spec->runs_kernels_of) : nullptr;
}

}  // namespace mirra::runtime
