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

Status require_dtype_in(const InferContext& ctx, size_t input, std::initializer_list<graph::DType> allowed);
Status require_same_dtype(const InferContext& ctx);
Status require_rank(const InferContext& ctx, size_t input, int rank);

// Output dim of a windowed op (conv, pool) along one axis; -1 when `in` is unknown.
int64_t window_output_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation, bool same_padding);
// Padding before the first element for SAME (TensorFlow's rule: the extra pad goes after).
int64_t same_padding_before(int64_t in, int64_t out, int64_t window, int64_t stride, int64_t dilation);

}  // namespace mirra::ops
