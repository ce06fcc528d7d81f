// KernelRegistry storage.
#include "runtime/kernel.h"

namespace mirra::runtime {

void KernelRegistry::add(std::string_view op, graph::DeviceKind kind, KernelDef def) {
  MIRRA_CHECK((def.fn != nullptr) != (def.async_fn != nullptr), "kernel needs exactly one function: " + std::string(op));
  const bool inserted = kernels_.emplace(std::pair{std::string(op), kind}, def).second;
  MIRRA_CHECK(inserted, "kernel registered twice: " + std::string(op));
}

void KernelRegistry::add_all(graph::DeviceKind to, graph::DeviceKind from) {
  for (const std::string& op : ops(from)) add(op, to, *find(op, from));
}

void KernelRegistry::share(std::string_view op, graph::DeviceKind to, graph::DeviceKind from) {
  const KernelDef* kernel = find(op, from);
  MIRRA_CHECK(kernel != nullptr, "no kernel to share: " + std::string(op));
  add(op, to, *kernel);
}

const KernelDef* KernelRegistry::find(std::string_view op, graph::DeviceKind kind) const {
  auto it = kernels_.find(std::pair{std::string(op), kind});
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::ops(graph::DeviceKind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, def] : kernels_) {
    if (key.second == kind) out.push_back(key.first);
  }
  return out;
}

}  // namespace mirra::runtime
