// check_and_infer: schema checks shared by the Builder and every loader.
#include "graph/op_schema.h"

#include <algorithm>

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

double CostContext::elements(const TensorType& type) {
  double n = 1;
  for (int i = 0; i < type.shape.rank(); ++i) n *= static_cast<double>(std::max<int64_t>(type.shape.dim(i), 0));
  return n;
}

double CostContext::bytes(const TensorType& type) { return elements(type) * static_cast<double>(dtype_size(type.dtype)); }

double CostContext::bytes_moved() const {
  double moved = 0;
  for (const TensorType& t : inputs) moved += bytes(t);
  for (const TensorType& t : outputs) moved += bytes(t);
  return moved;
}

OpCost op_cost(const OpSchema& schema, const CostContext& context) {
  if (schema.cost) return schema.cost(context);
  double flops = 0;
  for (const TensorType& t : context.outputs) flops += CostContext::elements(t);
  return {.flops = flops, .bytes = context.bytes_moved()};
}

OpCost costs_nothing(const CostContext&) { return {}; }

OpCost product_cost(const CostContext& context, double multiply_adds) {
  return {.flops = 2 * multiply_adds, .bytes = context.bytes_moved()};
}

Expected<std::vector<TensorType>> check_and_infer(const OpSchema& schema, Node& node,
                                                  std::span<const TensorType> inputs) {
  const std::string where = "node '" + node.name + "' (" + node.op + ")";
  const size_t declared = schema.inputs.size(), required = declared - schema.optional_inputs;
  const bool arity_ok = schema.variadic ? inputs.size() >= declared : inputs.size() >= required && inputs.size() <= declared;
  if (!arity_ok) {
    const std::string takes = schema.variadic ? std::to_string(declared) + " or more"
                              : required < declared ? std::to_string(required) + " to " + std::to_string(declared)
                                                    : std::to_string(declared);
    return invalid_argument(where + ": takes " + takes + " inputs, got " + std::to_string(inputs.size()));
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
    if (spec.optional) continue;
    if (!spec.default_value) return invalid_argument(where + ": missing required attribute '" + spec.name + "'");
    node.attrs.set(spec.name, *spec.default_value);
  }
  auto outputs = schema.infer(InferContext(node, inputs));
  if (!outputs.ok()) return outputs;
  // The backstop behind every inference rule's own checks: no output may have a dim below -1 or more
  // bytes than int64 counts, even with a batch of one, so no allocation is sized by a wrapped number.
  for (size_t i = 0; i < outputs->size(); ++i) {
    const TensorType& type = (*outputs)[i];
    const bool dims_valid = std::all_of(type.shape.dims.begin(), type.shape.dims.end(), [](int64_t d) { return d >= kUnknownDim; });
    if (!dims_valid || !type.byte_size_at(1)) {
      return invalid_argument(where + ": output " + std::to_string(i) + " " + type.to_string() +
                              (dims_valid ? " has more bytes than a 64-bit size counts" : " has a negative dim"));
    }
  }
  return outputs;
}

}  // namespace mirra::graph
