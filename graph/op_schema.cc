// check_and_infer: schema checks shared by the Builder and every loader.
#include "graph/op_schema.h"

namespace mirra::graph {

Status InferContext::error(std::string_view message) const {
  std::string inputs = "(";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (i > 0) inputs += ", ";
    inputs += inputs_[i].to_string();
  }
  inputs += ")";
  return invalid_argument("node '" + node_.name + "' (" + node_.op + "): " + std::string(message) +
                          "; inputs " + inputs);
}

Expected<std::vector<TensorType>> check_and_infer(const OpSchema& schema, Node& node,
                                                  std::span<const TensorType> inputs) {
  const std::string where = "node '" + node.name + "' (" + node.op + ")";
  const size_t declared = schema.inputs.size();
  const bool arity_ok = schema.variadic ? inputs.size() >= declared : inputs.size() == declared;
  if (!arity_ok) {
    return invalid_argument(where + ": takes " + std::to_string(declared) + (schema.variadic ? " or more" : "") +
                            " inputs, got " + std::to_string(inputs.size()));
  }
  for (const auto& [name, value] : node.attrs.entries()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& candidate : schema.attrs) {
      if (candidate.name == name) spec = &candidate;
    }
    if (spec == nullptr) return invalid_argument(where + ": unknown attribute '" + name + "'");
    if (attr_type(value) != spec->type) {
      return invalid_argument(where + ": attribute '" + name + "' must be " + std::string(attr_type_name(spec->type)) +
                              ", got " + std::string(attr_type_name(attr_type(value))));
    }
  }
  for (const AttrSpec& spec : schema.attrs) {
    if (node.attrs.contains(spec.name)) continue;
    if (!spec.default_value) return invalid_argument(where + ": missing required attribute '" + spec.name + "'");
    node.attrs.set(spec.name, *spec.default_value);
  }
  return schema.infer(InferContext(node, inputs));
}

}  // namespace mirra::graph
