// Field: one named value of every example of a data set: its element type (the types data files hold,
// numpy's numeric kinds among them, a wider set than the graph's dtypes) and its per-example shape.
//
//   Field{.name = "image", .type = ElementType::u8, .shape = {28, 28}}   // "image: u8[28,28]"
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/dtype.h"

namespace mirra::runtime::data {

enum class ElementType : uint8_t { boolean, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64 };

size_t element_size(ElementType type);
std::string_view element_type_name(ElementType type);  // "u8", "f32", "bool"
bool is_floating(ElementType type);
bool is_integer(ElementType type);  // bool is neither
// The element type a graph dtype's values are stored as.
ElementType element_type_of(graph::DType dtype);
// "f32", "i64", ...: the names element_type_name gives; nullopt for any other.
std::optional<ElementType> parse_element_type(std::string_view name);

struct Field {
  std::string name;
  ElementType type = ElementType::f32;
  std::vector<int64_t> shape;  // per example; empty: one value

  int64_t elements() const;
  size_t bytes() const { return static_cast<size_t>(elements()) * element_size(type); }
  std::string to_string() const;  // "image: u8[28,28]"
};

}  // namespace mirra::runtime::data
