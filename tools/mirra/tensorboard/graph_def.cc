// graph_def: nodes, inputs, devices and attributes in GraphDef's terms.
#include "tools/mirra/tensorboard/graph_def.h"

#include <type_traits>

#include "tools/mirra/tensorboard/summary.pb.h"

namespace mirra::runner::tensorboard {

namespace {

DataType data_type(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::f32: return DT_FLOAT;
    case graph::DType::f64: return DT_DOUBLE;
    case graph::DType::i32: return DT_INT32;
    case graph::DType::i64: return DT_INT64;
    case graph::DType::u8: return DT_UINT8;
    case graph::DType::boolean: return DT_BOOL;
    case graph::DType::bf16: return DT_BFLOAT16;
    case graph::DType::f16: return DT_HALF;
  }
  return DT_INVALID;
}

void set_shape(const graph::Shape& shape, TensorShapeProto& proto) {
  for (const int64_t d : shape.dims) proto.add_dim()->set_size(d);  // -1: unknown, as in TensorFlow
}

AttrValue attr_value(const graph::AttrValue& value) {
  AttrValue out;
  std::visit(
      [&]<class T>(const T& v) {
        if constexpr (std::is_same_v<T, int64_t>) {
          out.set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.set_f(static_cast<float>(v));
        } else if constexpr (std::is_same_v<T, bool>) {
          out.set_b(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.set_s(v);
        } else if constexpr (std::is_same_v<T, graph::DType>) {
          out.set_type(data_type(v));
        } else if constexpr (std::is_same_v<T, graph::Shape>) {
          set_shape(v, *out.mutable_shape());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (const int64_t i : v) out.mutable_list()->add_i(i);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (const double f : v) out.mutable_list()->add_f(static_cast<float>(f));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (const std::string& s : v) out.mutable_list()->add_s(s);
        } else {  // a constant tensor: its type, not its bytes
          static_assert(std::is_same_v<T, graph::TensorValue>);
          out.set_s(v.type.to_string());
        }
      },
      value);
  return out;
}

std::string input_name(const graph::Graph& graph, graph::ValueRef value) {
  const std::string& name = graph.node(value.node).name;
  return value.output == 0 ? name : name + ":" + std::to_string(value.output);
}

}  // namespace

std::string graph_def(const graph::Graph& graph) {
  GraphDef def;
  for (const graph::Node& node : graph.nodes()) {
    NodeDef& out = *def.add_node();
    out.set_name(node.name);
    out.set_op(node.op);
    for (const graph::ValueRef input : node.inputs) out.add_input(input_name(graph, input));
    for (const graph::NodeId control : node.control_inputs) out.add_input("^" + graph.node(control).name);
    if (node.device) out.set_device(node.device->to_string());
    auto& attrs = *out.mutable_attr();
    for (const auto& [name, value] : node.attrs.entries()) attrs[name] = attr_value(value);
    AttrValue::ListValue& shapes = *attrs["_output_shapes"].mutable_list();  // empty for a target
    for (const graph::TensorType& type : node.outputs) set_shape(type.shape, *shapes.add_shape());
  }
  def.mutable_versions()->set_producer(1);
  return def.SerializeAsString();
}

}  // namespace mirra::runner::tensorboard
