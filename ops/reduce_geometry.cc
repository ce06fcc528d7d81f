// Reduction axes and result shapes.
#include "ops/reduce_geometry.h"

#include <algorithm>

#include "ops/shape_inference.h"

namespace mirra::ops {

using runtime::TensorShape;

// Sorted, non-negative axes of a reduction node: every dim when its "axes" attribute is absent, none
// when it is empty (TensorFlow's rules); nullopt when an axis is out of range or named twice.
std::optional<std::vector<int>> reduced_axes(const graph::Node& node, int rank) {
  std::vector<int> out;
  const auto* axes = node.attrs.get<std::vector<int64_t>>("axes");
  if (axes == nullptr) {
    for (int d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t axis : *axes) {
    const auto normalized = normalize_axis(axis, rank);
    if (!normalized) return std::nullopt;
    out.push_back(*normalized);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return std::nullopt;
  return out;
}

TensorShape reduced_shape(const TensorShape& in, const std::vector<int>& axes, bool keep_dims) {
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    const bool is_reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!is_reduced) {
      dims.push_back(in.dim(d));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  return TensorShape(dims);
}

}  // namespace mirra::ops
