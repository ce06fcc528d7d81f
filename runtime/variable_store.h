// VariableStore: the values of a session's variables, by name, kept across steps. A Variable
// kernel creates its value on first use (from its initialiser) and later steps see the same buffer.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/tensor.h"

namespace mirra::runtime {

class VariableStore {
 public:
  using Initializer = std::function<graph::Expected<Tensor>()>;

  // The variable's value; runs `init` to create it when it does not exist yet.
  graph::Expected<Tensor> get_or_create(const std::string& name, const Initializer& init);
  std::optional<Tensor> find(const std::string& name) const;
  void set(const std::string& name, Tensor value);
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Tensor, std::less<>> values_;
};

}  // namespace mirra::runtime
