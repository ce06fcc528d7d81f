// Attribute encoding: one union member per graph::AttrType.
#include "serialization/attr_codec.h"

#include "serialization/tensor_codec.h"

namespace mirra::serialization {

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

flatbuffers::Offset<fb::Attr> write_attr(flatbuffers::FlatBufferBuilder& fbb, const std::string& name,
                                         const graph::AttrValue& value) {
  std::pair<fb::AttrValue, flatbuffers::Offset<void>> encoded = std::visit(
      Overloaded{
          [&](int64_t v) { return std::pair{fb::AttrValue::IntAttr, fb::CreateIntAttr(fbb, v).Union()}; },
          [&](double v) { return std::pair{fb::AttrValue::RealAttr, fb::CreateRealAttr(fbb, v).Union()}; },
          [&](bool v) { return std::pair{fb::AttrValue::BoolAttr, fb::CreateBoolAttr(fbb, v).Union()}; },
          [&](const std::string& v) {
            return std::pair{fb::AttrValue::StringAttr, fb::CreateStringAttr(fbb, fbb.CreateString(v)).Union()};
          },
          [&](graph::DType v) { return std::pair{fb::AttrValue::DTypeAttr, fb::CreateDTypeAttr(fbb, to_fb(v)).Union()}; },
          [&](const graph::Shape& v) {
            return std::pair{fb::AttrValue::ShapeAttr, fb::CreateShapeAttr(fbb, fbb.CreateVector(v.dims)).Union()};
          },
          [&](const std::vector<int64_t>& v) {
            return std::pair{fb::AttrValue::IntListAttr, fb::CreateIntListAttr(fbb, fbb.CreateVector(v)).Union()};
          },
          [&](const std::vector<double>& v) {
            return std::pair{fb::AttrValue::RealListAttr, fb::CreateRealListAttr(fbb, fbb.CreateVector(v)).Union()};
          },
          [&](const std::vector<std::string>& v) {
            return std::pair{fb::AttrValue::StringListAttr,
                             fb::CreateStringListAttr(fbb, fbb.CreateVectorOfStrings(v)).Union()};
          },
          [&](const graph::TensorValue& v) {
            return std::pair{fb::AttrValue::TensorAttr, fb::CreateTensorAttr(fbb, write_tensor(fbb, "", v)).Union()};
          },
      },
      value);
  const auto name_offset = fbb.CreateString(name);
  return fb::CreateAttr(fbb, name_offset, encoded.first, encoded.second);
}

template <class T>
graph::Expected<graph::AttrValue> read_list(const flatbuffers::Vector<T>* values, const std::string& where) {
  if (!elements_aligned(values)) return graph::invalid_argument(where + ": misaligned list");
  return graph::AttrValue(values == nullptr ? std::vector<T>{} : std::vector<T>(values->begin(), values->end()));
}

graph::Expected<graph::AttrValue> read_value(const fb::Attr& attr, const std::string& where) {
  switch (attr.value_type()) {
    case fb::AttrValue::IntAttr: return graph::AttrValue(attr.value_as_IntAttr()->value());
    case fb::AttrValue::RealAttr: return graph::AttrValue(attr.value_as_RealAttr()->value());
    case fb::AttrValue::BoolAttr: return graph::AttrValue(attr.value_as_BoolAttr()->value());
    case fb::AttrValue::StringAttr: {
      const auto* s = attr.value_as_StringAttr()->value();
      return graph::AttrValue(s == nullptr ? std::string() : s->str());
    }
    case fb::AttrValue::DTypeAttr: {
      MIRRA_ASSIGN_OR_RETURN(const graph::DType dtype, read_dtype(attr.value_as_DTypeAttr()->value(), where));
      return graph::AttrValue(dtype);
    }
    case fb::AttrValue::ShapeAttr: {
      MIRRA_ASSIGN_OR_RETURN(graph::Shape shape, read_shape(attr.value_as_ShapeAttr()->dims(), true, where));
      return graph::AttrValue(std::move(shape));
    }
    case fb::AttrValue::IntListAttr: return read_list(attr.value_as_IntListAttr()->values(), where);
    case fb::AttrValue::RealListAttr: return read_list(attr.value_as_RealListAttr()->values(), where);
    case fb::AttrValue::StringListAttr: {
      std::vector<std::string> out;
      if (const auto* values = attr.value_as_StringListAttr()->values()) {
        for (const auto* s : *values) out.push_back(s == nullptr ? std::string() : s->str());
      }
      return graph::AttrValue(std::move(out));
    }
    case fb::AttrValue::TensorAttr: {
      MIRRA_ASSIGN_OR_RETURN(NamedTensor tensor, read_tensor(attr.value_as_TensorAttr()->value(), where));
      return graph::AttrValue(std::move(tensor.value));
    }
    case fb::AttrValue::NONE: break;
  }
  return graph::invalid_argument(where + ": unknown attribute kind " +
                                 std::to_string(static_cast<int>(attr.value_type())));
}

}  // namespace

flatbuffers::Offset<FbAttrs> write_attrs(flatbuffers::FlatBufferBuilder& fbb, const graph::AttrMap& attrs) {
  std::vector<flatbuffers::Offset<fb::Attr>> offsets;
  offsets.reserve(attrs.size());
  for (const auto& entry : attrs.entries()) offsets.push_back(write_attr(fbb, entry.first, entry.second));
  return fbb.CreateVector(offsets);
}

graph::Expected<graph::AttrMap> read_attrs(const FbAttrs* attrs, std::string_view what) {
  graph::AttrMap out;
  if (attrs == nullptr) return out;
  for (uint32_t i = 0; i < attrs->size(); ++i) {
    const fb::Attr& attr = *attrs->Get(i);
    const std::string name = attr.name()->str();
    const std::string where = std::string(what) + " attribute '" + name + "'";
    if (out.contains(name)) return graph::invalid_argument(where + " appears twice");
    MIRRA_ASSIGN_OR_RETURN(graph::AttrValue value, read_value(attr, where));
    out.set(name, std::move(value));
  }
  return out;
}

}  // namespace mirra::serialization
