// VariableStore.
#include "runtime/variable_store.h"

namespace mirra::runtime {

graph::Expected<Tensor> VariableStore::get_or_create(const std::string& name, const Initializer& init) {
  std::lock_guard lock(mutex_);
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  auto value = init();
  if (!value.ok()) return value.status();
  values_.emplace(name, *value);
  return value;
}

std::optional<Tensor> VariableStore::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void VariableStore::set(const std::string& name, Tensor value) {
  std::lock_guard lock(mutex_);
  values_[name] = std::move(value);
}

std::vector<std::string> VariableStore::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& entry : values_) out.push_back(entry.first);
  return out;
}

}  // namespace mirra::runtime
