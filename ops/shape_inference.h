// Shape-inference helpers shared by op schemas: NumPy broadcasting over possibly unknown dims,
// axis normalisation, and the usual "same dtype / floating dtype" checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace mirra::ops {

using graph::Expected;
using graph::InferContext;
using graph::Shape;
using graph::Status;
using graph::TensorType;

// NumPy broadcasting; an unknown dim broadcasts against 1 to unknown, against n to n.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Maps an axis in [-rank, rank) to [0, rank); nullopt when out of range.
std::optional<int> normalize_axis(int64_t axis, int rank);

Status require_dtype_in(const InferContext& ctx, size_t input, const std::vector<graph::DType>& allowed);
Status require_same_dtype(const InferContext& ctx);
Status require_rank(const InferContext& ctx, size_t input, int rank);

// Matrix products and convolutions: operands 0 .. operands-1 share one float dtype (f32, f64, bf16,
// f16), and the output has it, or f32 when the node's f32_output attribute is set: 16-bit operands
// are multiplied and summed in f32, and that attribute keeps the sum instead of rounding it (what
// mixed precision wants: 16-bit operands, f32 activations and gradients). On GPUs a convolution's
// sum is rounded to the 16-bit type first, as cuDNN's 16-bit convolutions write it.
Expected<graph::DType> product_output_dtype(const InferContext& ctx, size_t operands);

// Output dim of a windowed op (conv, pool) along one axis; -1 when `in` is unknown.
int64_t window_output_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation, bool same_padding);

// A windowed op's spatial padding: TensorFlow's SAME or VALID, or EXPLICIT amounts before and after
// the height and width dims (Conv2D's explicit_paddings: two numbers per dim in data_format order).
struct WindowPadding {
  bool same = false;
  bool is_explicit = false;
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // EXPLICIT's

  // From a node's padding, explicit_paddings and data_format attributes as their op's schema check
  // accepted them (check_padding_and_format).
  static WindowPadding of(const graph::AttrMap& attrs);
  // Output dim along height (axis 0) or width (axis 1); -1 when `in` is unknown.
  int64_t output_dim(int axis, int64_t in, int64_t window, int64_t stride, int64_t dilation) const;
  // Padding before the first element along the axis (SAME's by TensorFlow's rule, EXPLICIT's as given).
  int64_t before(int axis, int64_t in, int64_t out, int64_t window, int64_t stride, int64_t dilation) const;
};
// Padding before the first element for SAME (TensorFlow's rule: the extra pad goes after).
int64_t same_padding_before(int64_t in, int64_t out, int64_t window, int64_t stride, int64_t dilation);

}  // namespace mirra::ops
