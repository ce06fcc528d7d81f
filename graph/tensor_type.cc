// Shape and TensorType helpers.
#include "graph/tensor_type.h"

namespace mirra::graph {

bool Shape::is_fully_defined() const {
  for (int64_t d : dims) {
    if (d < 0) return false;
  }
  return true;
}

std::optional<int64_t> Shape::num_elements() const {
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(product, d, &product)) return std::nullopt;
  }
  return product;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ",";
    out += dims[i] < 0 ? "?" : std::to_string(dims[i]);
  }
  return out + "]";
}

bool Shape::accepts(std::span<const int64_t> concrete) const {
  if (concrete.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0 && dims[i] != concrete[i]) return false;
  }
  return true;
}

std::optional<int64_t> TensorType::byte_size_at(int64_t unknown_dim) const {
  auto bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape.dims) {
    if (__builtin_mul_overflow(bytes, d < 0 ? unknown_dim : d, &bytes)) return std::nullopt;
  }
  return bytes;
}

std::string TensorType::to_string() const { return std::string(dtype_name(dtype)) + shape.to_string(); }

bool Shape::compatible_with(const Shape& other) const {
  if (rank() != other.rank()) return false;
  for (int d = 0; d < rank(); ++d) {
    if (dim(d) >= 0 && other.dim(d) >= 0 && dim(d) != other.dim(d)) return false;
  }
  return true;
}

}  // namespace mirra::graph
