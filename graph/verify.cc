// verify_structure: the checks a graph needs before anything walks it; verify_types: its nodes against
// their schemas.
#include "graph/verify.h"

#include <unordered_set>

namespace mirra::graph {

Status verify_structure(const Graph& graph) {
  std::unordered_set<std::string_view> names;
  const auto nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    const std::string where = "node " + std::to_string(i) + " '" + node.name + "'";
    if (node.id != i) return invalid_argument(where + ": id " + std::to_string(node.id) + " does not match its position");
    if (node.name.empty()) return invalid_argument(where + ": empty name");
    if (!names.insert(node.name).second) return invalid_argument(where + ": name is used by another node");
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const ValueRef input = node.inputs[k];
      const std::string which = where + " input " + std::to_string(k);
      if (input.node >= nodes.size()) return invalid_argument(which + ": refers to missing node " + std::to_string(input.node));
      if (input.node == node.id) return invalid_argument(which + ": a node cannot be its own input");
      if (input.output >= nodes[input.node].outputs.size()) {
        return invalid_argument(which + ": node '" + nodes[input.node].name + "' has no output " +
                                std::to_string(input.output));
      }
    }
    for (NodeId control : node.control_inputs) {
      if (control >= nodes.size()) return invalid_argument(where + ": control input refers to missing node " + std::to_string(control));
      if (control == node.id) return invalid_argument(where + ": a node cannot be its own control input");
    }
  }
  auto order = graph.topological_order();
  return order.ok() ? Status() : order.status();
}

namespace {

// Whether a node may declare `declared` for an output its schema infers as `inferred`: the same dtype
// and rank, and the same size in every dim both know.
bool declarable(const TensorType& inferred, const TensorType& declared) {
  if (inferred.dtype != declared.dtype || inferred.shape.rank() != declared.shape.rank()) return false;
  for (int d = 0; d < inferred.shape.rank(); ++d) {
    const int64_t a = inferred.shape.dim(d), b = declared.shape.dim(d);
    if (a != kUnknownDim && b != kUnknownDim && a != b) return false;
  }
  return true;
}

}  // namespace

Status verify_types(const Graph& graph, const OpRegistry& registry, std::span<const NodeId> needed_for) {
  const std::vector<bool> needed = needed_for.empty() ? std::vector<bool>(graph.size(), true) : graph.needed_for(needed_for);
  for (const Node& node : graph.nodes()) {
    if (!needed[node.id]) continue;
    const OpSchema* schema = registry.find(node.op);
    if (schema == nullptr) return invalid_argument("node '" + node.name + "': op '" + node.op + "' is not registered");
    std::vector<TensorType> inputs;
    for (const ValueRef input : node.inputs) inputs.push_back(graph.type(input));
    Node checked = node;  // check_and_infer fills in defaulted attributes
    MIRRA_ASSIGN_OR_RETURN(const std::vector<TensorType> outputs, check_and_infer(*schema, checked, inputs));
    if (outputs.size() != node.outputs.size()) {
      return invalid_argument("node '" + node.name + "' (" + node.op + "): declares " + std::to_string(node.outputs.size()) +
                              " outputs, its schema gives " + std::to_string(outputs.size()));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!declarable(outputs[i], node.outputs[i])) {
        return invalid_argument("node '" + node.name + "' (" + node.op + "): output " + std::to_string(i) + " is declared " +
                                node.outputs[i].to_string() + ", but its inputs give " + outputs[i].to_string());
      }
    }
  }
  return Status();
}

}  // namespace mirra::graph
