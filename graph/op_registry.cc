// OpRegistry storage.
#include "graph/op_registry.h"

#include "graph/check.h"

namespace mirra::graph {

void OpRegistry::add(OpSchema schema) {
  MIRRA_CHECK(static_cast<bool>(schema.infer), schema.name + " has no inference rule");
  const std::string name = schema.name;
  const bool inserted = schemas_.emplace(name, std::move(schema)).second;
  MIRRA_CHECK(inserted, "op registered twice: " + name);
}

const OpSchema* OpRegistry::find(std::string_view name) const {
  auto it = schemas_.find(name);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& entry : schemas_) out.push_back(entry.first);
  return out;
}

}  // namespace mirra::graph
