// Typed node attributes: AttrValue (int, float, bool, string, dtype, shape, lists, tensor) and AttrMap,
// a small name-sorted map so that printing and comparing graphs is stable.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "graph/tensor_type.h"

namespace mirra::graph {

// A constant tensor stored in the graph (the value of a Const node). Bytes are shared, never mutated.
struct TensorValue {
  TensorType type;  // fully defined shape
  std::shared_ptr<const std::vector<std::byte>> bytes;

  template <class T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(bytes->data()), bytes->size() / sizeof(T)};
  }
  template <class T>
  static TensorValue from(Shape shape, std::span<const T> values);
  friend bool operator==(const TensorValue& a, const TensorValue& b) {
    return a.type == b.type && *a.bytes == *b.bytes;
  }
};

using AttrValue = std::variant<int64_t, double, bool, std::string, DType, Shape, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, TensorValue>;

// The kinds an AttrValue can hold, in the variant's order.
enum class AttrType : uint8_t { integer, real, boolean, string, dtype, shape, int_list, real_list, string_list, tensor };

AttrType attr_type(const AttrValue& value);
std::string_view attr_type_name(AttrType type);
// A stable, readable form: 3, 0.5, true, "SAME", f32, [?,10], [1,2], <f32[2,2] 1 2 3 4>.
std::string attr_to_string(const AttrValue& value);

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<std::string, AttrValue>> entries);

  void set(std::string_view name, AttrValue value);
  void erase(std::string_view name);
  const AttrValue* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  // The value under `name` when it exists and holds a T; otherwise null.
  template <class T>
  const T* get(std::string_view name) const {
    const AttrValue* value = find(name);
    return value ? std::get_if<T>(value) : nullptr;
  }
  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

  friend bool operator==(const AttrMap&, const AttrMap&) = default;

 private:
  std::vector<std::pair<std::string, AttrValue>> entries_;  // sorted by name
};

template <class T>
TensorValue TensorValue::from(Shape shape, std::span<const T> values) {
  auto bytes = std::make_shared<std::vector<std::byte>>(values.size_bytes());
  if (!values.empty()) std::memcpy(bytes->data(), values.data(), values.size_bytes());
  return TensorValue{TensorType{dtype_of<T>(), std::move(shape)}, std::move(bytes)};
}

}  // namespace mirra::graph
