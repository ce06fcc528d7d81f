// Builder: naming, scopes, seeds, and schema-checked node insertion.
#include "graph/builder.h"

namespace mirra::graph {

Builder::Builder(Graph& graph, const OpRegistry& registry, uint64_t seed)
    : graph_(graph), registry_(registry), seed_(seed) {}

std::string Builder::scope_path() const {
  std::string path;
  for (const std::string& scope : scopes_) path += (path.empty() ? "" : "/") + scope;
  return path;
}

std::string Builder::scoped_name(std::string_view base) {
  std::string name;
  for (const std::string& scope : scopes_) name += scope + "/";
  name += base;
  return graph_.unique_name(name);
}

Builder::ScopeGuard Builder::scope(std::string_view name) {
  scopes_.emplace_back(name);
  return ScopeGuard(*this);
}

uint64_t Builder::next_seed() {
  // splitmix64 of (seed, counter): well-spread seeds for neighbouring counters.
  uint64_t z = seed_ + 0x9E3779B97F4A7C15ull * ++seed_counter_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void Builder::fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

NodeId Builder::add(NodeSpec spec) {
  Node node;
  node.op = std::move(spec.op);
  node.name = scoped_name(spec.name.empty() ? node.op : spec.name);
  node.attrs = std::move(spec.attrs);
  node.control_inputs = std::move(spec.control_inputs);
  node.device = device_;
  for (const ValueRef input : spec.inputs) {
    // An invalid input comes from an earlier failure, which status_ already holds.
    if (!input.valid()) {
      fail(invalid_argument("node '" + node.name + "' (" + node.op + "): an input is invalid"));
      return kInvalidNode;
    }
  }
  const OpSchema* schema = registry_.find(node.op);
  if (schema == nullptr) {
    fail(invalid_argument("node '" + node.name + "': unknown op '" + node.op + "'"));
    return kInvalidNode;
  }
  std::vector<TensorType> input_types;
  input_types.reserve(spec.inputs.size());
  for (const ValueRef input : spec.inputs) {
    if (input.node >= graph_.size() || input.output >= graph_.node(input.node).outputs.size()) {
      fail(invalid_argument("node '" + node.name + "' (" + node.op + "): input refers to a missing value"));
      return kInvalidNode;
    }
    input_types.push_back(graph_.type(input));
  }
  node.inputs = std::move(spec.inputs);
  auto outputs = check_and_infer(*schema, node, input_types);
  if (!outputs.ok()) {
    fail(outputs.status());
    return kInvalidNode;
  }
  node.outputs = std::move(outputs).value();
  return graph_.add_node(std::move(node));
}

ValueRef Builder::add_value(NodeSpec spec) {
  const NodeId id = add(std::move(spec));
  if (id == kInvalidNode) return {};
  return ValueRef{id, 0};
}

}  // namespace mirra::graph
