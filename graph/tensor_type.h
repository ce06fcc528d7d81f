// Shape and TensorType: what the graph knows about a value before it runs. A dimension of -1 is
// unknown until run time (the batch dimension of inputs); a rank is always known.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace mirra::graph {

inline constexpr int64_t kUnknownDim = -1;

struct Shape {
  std::vector<int64_t> dims;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims(d) {}
  explicit Shape(std::vector<int64_t> d) : dims(std::move(d)) {}

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<size_t>(i)]; }
  bool is_fully_defined() const;
  // Product of the dimensions; nullopt when one is unknown or the product overflows int64.
  std::optional<int64_t> num_elements() const;
  // "[?,784]"
  std::string to_string() const;
  // True when a value of shape `concrete` may flow where this shape is expected (-1 matches any).
  bool accepts(std::span<const int64_t> concrete) const;
  // Same rank, and each dim equal or unknown on either side.
  bool compatible_with(const Shape& other) const;

  friend bool operator==(const Shape&, const Shape&) = default;
};

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  // Bytes of a value of this type when every unknown dim is `unknown_dim`; nullopt when that
  // overflows int64.
  std::optional<int64_t> byte_size_at(int64_t unknown_dim) const;
  // "f32[?,784]"
  std::string to_string() const;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

}  // namespace mirra::graph
