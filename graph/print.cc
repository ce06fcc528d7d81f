// to_text.
#include "graph/print.h"

namespace mirra::graph {
namespace {

std::string value_name(const Graph& graph, ValueRef value) {
  const Node& producer = graph.node(value.node);
  if (producer.outputs.size() <= 1 && value.output == 0) return producer.name;
  return producer.name + ":" + std::to_string(value.output);
}

std::string attrs_text(const AttrMap& attrs) {
  std::string out;
  for (const auto& [name, value] : attrs.entries()) {
    if (!out.empty()) out += ", ";
    out += name + "=" + attr_to_string(value);
  }
  return out;
}

}  // namespace

std::string to_text(const Graph& graph) {
  std::string out;
  for (const Node& node : graph.nodes()) {
    out += node.name + " = " + node.op + "(";
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i > 0) out += ", ";
      out += value_name(graph, node.inputs[i]);
    }
    for (size_t i = 0; i < node.control_inputs.size(); ++i) {
      if (i > 0 || !node.inputs.empty()) out += ", ";
      out += "^" + graph.node(node.control_inputs[i]).name;
    }
    out += ")";
    if (node.attrs.size() > 0) out += " {" + attrs_text(node.attrs) + "}";
    out += " :";
    for (size_t i = 0; i < node.outputs.size(); ++i) out += (i > 0 ? ", " : " ") + node.outputs[i].to_string();
    if (node.device) out += " @" + node.device->to_string();
    out += "\n";
  }
  return out;
}

}  // namespace mirra::graph
