// Array ops. Layout: Reshape (one -1 allowed; shares the buffer), Transpose, Identity, Cast, OneHot,
// and for gradients ZerosLike and ReshapeLike (shapes taken at run time).
// Slicing (slicing_ops.cc): Concat, Split (num_split equal parts), Slice (size -1: to the end), Pad.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::DType;
using graph::ValueRef;

ValueRef reshape(Builder& b, ValueRef x, std::vector<int64_t> shape);
ValueRef transpose(Builder& b, ValueRef x, std::vector<int64_t> perm);
ValueRef identity(Builder& b, ValueRef x);
ValueRef zeros_like(Builder& b, ValueRef x);
// x's elements in like's run-time shape.
ValueRef reshape_like(Builder& b, ValueRef x, ValueRef like);
ValueRef cast(Builder& b, ValueRef x, DType dtype);
ValueRef one_hot(Builder& b, ValueRef indices, int64_t depth, double on_value = 1.0, double off_value = 0.0,
                 DType dtype = DType::f32);

ValueRef concat(Builder& b, const std::vector<ValueRef>& values, int64_t axis);
std::vector<ValueRef> split(Builder& b, ValueRef x, int64_t axis, int64_t num_split);
ValueRef slice(Builder& b, ValueRef x, std::vector<int64_t> begin, std::vector<int64_t> size);
// paddings: [before_0, after_0, before_1, after_1, ...], one pair per dim.
ValueRef pad(Builder& b, ValueRef x, std::vector<int64_t> paddings, double constant_value = 0.0);

}  // namespace mirra::ops
