// AttrValue names and printing; AttrMap storage.
#include "graph/attr.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace mirra::graph {

AttrType attr_type(const AttrValue& value) { return static_cast<AttrType>(value.index()); }

std::string_view attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::integer: return "int";
    case AttrType::real: return "float";
    case AttrType::boolean: return "bool";
    case AttrType::string: return "string";
    case AttrType::dtype: return "dtype";
    case AttrType::shape: return "shape";
    case AttrType::int_list: return "list(int)";
    case AttrType::real_list: return "list(float)";
    case AttrType::string_list: return "list(string)";
    case AttrType::tensor: return "tensor";
  }
  return "?";
}

namespace {

// Shortest text that reads back to the same double.
std::string real_to_string(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

template <class T>
std::string list_to_string(const std::vector<T>& values, auto&& format) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += format(values[i]);
  }
  return out + "]";
}

std::string tensor_to_string(const TensorValue& tensor) {
  constexpr size_t kShown = 8;
  std::string out = "<" + tensor.type.to_string();
  const size_t count = tensor.bytes->size() / dtype_size(tensor.type.dtype);
  for (size_t i = 0; i < std::min(count, kShown); ++i) {
    out += " ";
    switch (tensor.type.dtype) {
      case DType::f32: out += real_to_string(tensor.values<float>()[i]); break;
      case DType::f64: out += real_to_string(tensor.values<double>()[i]); break;
      case DType::i32: out += std::to_string(tensor.values<int32_t>()[i]); break;
      case DType::i64: out += std::to_string(tensor.values<int64_t>()[i]); break;
      case DType::u8: out += std::to_string(tensor.values<uint8_t>()[i]); break;
      case DType::boolean: out += tensor.values<bool>()[i] ? "true" : "false"; break;
      case DType::bf16: out += real_to_string(static_cast<float>(tensor.values<bfloat16>()[i])); break;
      case DType::f16: out += real_to_string(static_cast<float>(tensor.values<float16>()[i])); break;
    }
  }
  if (count > kShown) out += " ...";
  return out + ">";
}

}  // namespace

std::string attr_to_string(const AttrValue& value) {
  struct Printer {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return real_to_string(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(DType v) const { return std::string(dtype_name(v)); }
    std::string operator()(const Shape& v) const { return v.to_string(); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return list_to_string(v, [](int64_t x) { return std::to_string(x); });
    }
    std::string operator()(const std::vector<double>& v) const { return list_to_string(v, real_to_string); }
    std::string operator()(const std::vector<std::string>& v) const {
      return list_to_string(v, [](const std::string& x) { return "\"" + x + "\""; });
    }
    std::string operator()(const TensorValue& v) const { return tensor_to_string(v); }
  };
  return std::visit(Printer{}, value);
}

AttrMap::AttrMap(std::initializer_list<std::pair<std::string, AttrValue>> entries) {
  for (const auto& [name, value] : entries) set(name, value);
}

void AttrMap::set(std::string_view name, AttrValue value) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& entry, std::string_view key) { return entry.first < key; });
  if (it != entries_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    entries_.insert(it, {std::string(name), std::move(value)});
  }
}

void AttrMap::erase(std::string_view name) {
  std::erase_if(entries_, [&](const auto& entry) { return entry.first == name; });
}

const AttrValue* AttrMap::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& entry, std::string_view key) { return entry.first < key; });
  return it != entries_.end() && it->first == name ? &it->second : nullptr;
}

}  // namespace mirra::graph
