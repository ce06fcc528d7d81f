// MatMul (rank-2, optional transposes; f32, f64), BatchMatMulV2 and BiasAdd (bias along the channel dim: last for
// NHWC and for matrices, dim 1 for NCHW).
#pragma once

#include <string>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

ValueRef matmul(Builder& b, ValueRef x, ValueRef y, bool transpose_x = false, bool transpose_y = false);
// BatchMatMulV2 (batch_matmul_ops.cc): op(x) * op(y) over the last two dims, batch dims broadcast.
ValueRef batch_matmul(Builder& b, ValueRef x, ValueRef y, bool adj_x = false, bool adj_y = false);
ValueRef bias_add(Builder& b, ValueRef x, ValueRef bias, const std::string& data_format = "NHWC");

}  // namespace mirra::ops
