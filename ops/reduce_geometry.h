// What a reduction node (ReduceSum, ReduceMean, ReduceMax) reduces: its axes and the shape of its
// result, for the CPU and GPU kernels alike.
#pragma once

#include <optional>
#include <vector>

#include "graph/node.h"
#include "runtime/tensor_shape.h"

namespace mirra::ops {

// Sorted, non-negative axes of a reduction node: every dim when its "axes" attribute is absent, none
// when it is empty (TensorFlow's rules); nullopt when an axis is out of range or named twice.
std::optional<std::vector<int>> reduced_axes(const graph::Node& node, int rank);

// `in` without the reduced axes (or with them as 1 when keep_dims).
runtime::TensorShape reduced_shape(const runtime::TensorShape& in, const std::vector<int>& axes, bool keep_dims);

}  // namespace mirra::ops
