// Array ops. Layout: Reshape (one -1 allowed), ExpandDims and Squeeze (all three share the buffer),
// Transpose, Tile, Identity, Cast, OneHot, and for gradients ZerosLike and ReshapeLike (shapes taken at
// run time).
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
// x with a dim of size 1 inserted at `axis` (negative: counted from the end of the output's dims).
ValueRef expand_dims(Builder& b, ValueRef x, int64_t axis);
// x without its dims of size 1 at `axes` (all of them when `axes` is empty).
ValueRef squeeze(Builder& b, ValueRef x, std::vector<int64_t> axes = {});
ValueRef transpose(Builder& b, ValueRef x, std::vector<int64_t> perm);
// x repeated multiples[d] times along each dim d.
ValueRef tile(Builder& b, ValueRef x, std::vector<int64_t> multiples);
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
