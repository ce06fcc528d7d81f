// Element types and fields: sizes, names, and their mapping from graph dtypes.
#include "runtime/data/field.h"

#include <array>

namespace mirra::runtime::data {

namespace {

struct TypeInfo {
  ElementType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 13> kTypes = {{{ElementType::boolean, "bool", 1},
                                              {ElementType::i8, "i8", 1},
                                              {ElementType::u8, "u8", 1},
                                              {ElementType::i16, "i16", 2},
                                              {ElementType::u16, "u16", 2},
                                              {ElementType::i32, "i32", 4},
                                              {ElementType::u32, "u32", 4},
                                              {ElementType::i64, "i64", 8},
                                              {ElementType::u64, "u64", 8},
                                              {ElementType::f16, "f16", 2},
                                              {ElementType::bf16, "bf16", 2},
                                              {ElementType::f32, "f32", 4},
                                              {ElementType::f64, "f64", 8}}};

const TypeInfo& info(ElementType type) { return kTypes[static_cast<size_t>(type)]; }

}  // namespace

size_t element_size(ElementType type) { return info(type).size; }

std::string_view element_type_name(ElementType type) { return info(type).name; }

bool is_floating(ElementType type) {
  return type == ElementType::f16 || type == ElementType::bf16 || type == ElementType::f32 || type == ElementType::f64;
}

bool is_integer(ElementType type) { return type != ElementType::boolean && !is_floating(type); }

ElementType element_type_of(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::f32: return ElementType::f32;
    case graph::DType::f64: return ElementType::f64;
    case graph::DType::i32: return ElementType::i32;
    case graph::DType::i64: return ElementType::i64;
    case graph::DType::u8: return ElementType::u8;
    case graph::DType::boolean: return ElementType::boolean;
    case graph::DType::bf16: return ElementType::bf16;
    case graph::DType::f16: return ElementType::f16;
  }
  return ElementType::f32;
}

std::optional<ElementType> parse_element_type(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (t.name == name) return t.type;
  }
  return std::nullopt;
}

int64_t Field::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Field::to_string() const {
  std::string out = name + ": " + std::string(element_type_name(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace mirra::runtime::data
