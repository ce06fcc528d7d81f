// verify_structure: the checks a graph needs before anything walks it.
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

}  // namespace mirra::graph
