// to_text and to_dot.
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

std::string dot_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
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

std::string to_dot(const Graph& graph) {
  std::string out = "digraph mirra {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const Node& node : graph.nodes()) {
    std::string label = dot_escape(node.name) + "\\n" + dot_escape(node.op);
    if (node.device) label += " @" + node.device->to_string();
    out += "  n" + std::to_string(node.id) + " [label=\"" + label + "\"];\n";
  }
  for (const Node& node : graph.nodes()) {
    for (ValueRef input : node.inputs) {
      out += "  n" + std::to_string(input.node) + " -> n" + std::to_string(node.id) + " [label=\"" +
             dot_escape(graph.type(input).to_string()) + "\"];\n";
    }
    for (NodeId control : node.control_inputs) {
      out += "  n" + std::to_string(control) + " -> n" + std::to_string(node.id) + " [style=dashed];\n";
    }
  }
  return out + "}\n";
}

}  // namespace mirra::graph
