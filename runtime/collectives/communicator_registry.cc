// The registry of communicators by name (runtime/collectives/communicator_registry.h).
#include "runtime/collectives/communicator_registry.h"

#include <algorithm>
#include <mutex>

namespace mirra::runtime {

namespace {

constexpr std::string_view kBuiltIn[] = {"auto", "in_process", "mpi"};

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<std::string, CommunicatorFactory>> entries;
};

Registry& registry() {
  static Registry* registry = new Registry();  // never destroyed: sessions may outlive static destructors
  return *registry;
}

}  // namespace

graph::Status register_communicator(std::string name, CommunicatorFactory make) {
  const bool well_formed = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!well_formed) return graph::invalid_argument("communicator name '" + name + "' must be made of [a-z0-9_]");
  if (!make) return graph::invalid_argument("communicator '" + name + "' has no factory");
  if (std::find(std::begin(kBuiltIn), std::end(kBuiltIn), name) != std::end(kBuiltIn)) {
    return graph::invalid_argument("communicator name '" + name + "' is built in");
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& entry : r.entries) {
    if (entry.first == name) return graph::invalid_argument("communicator '" + name + "' is already registered");
  }
  r.entries.emplace_back(std::move(name), std::move(make));
  return graph::Status();
}

std::vector<std::pair<std::string, CommunicatorFactory>> registered_communicators() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.entries;
}

bool is_communicator_name(std::string_view name) {
  if (std::find(std::begin(kBuiltIn), std::end(kBuiltIn), name) != std::end(kBuiltIn)) return true;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return std::any_of(r.entries.begin(), r.entries.end(), [&](const auto& entry) { return entry.first == name; });
}

std::string communicator_names() {
  std::string names;
  for (std::string_view name : kBuiltIn) names += (names.empty() ? "" : ", ") + std::string(name);
  for (const auto& entry : registered_communicators()) names += ", " + entry.first;
  return names;
}

}  // namespace mirra::runtime
