// OpRegistry: the one table of op schemas. Filled explicitly (ops::register_builtin_ops), never by
// static initialisers, so what exists is what was registered, in a known order.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/op_schema.h"

namespace mirra::graph {

class OpRegistry {
 public:
  // Adds a schema; a second schema with the same name is a bug and aborts.
  void add(OpSchema schema);
  const OpSchema* find(std::string_view name) const;
  // Names of every registered op, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, OpSchema, std::less<>> schemas_;
};

}  // namespace mirra::graph
