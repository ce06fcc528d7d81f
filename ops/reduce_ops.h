// Reductions: ReduceSum, ReduceMean, ReduceMax over a list of axes (empty: all), optionally keeping
// reduced dims as 1; ArgMax along one axis (to i64). Each output element sums in a fixed order,
// whatever the thread count, so results are deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

ValueRef reduce_sum(Builder& b, ValueRef x, std::vector<int64_t> axes = {}, bool keep_dims = false);
ValueRef reduce_mean(Builder& b, ValueRef x, std::vector<int64_t> axes = {}, bool keep_dims = false);
ValueRef reduce_max(Builder& b, ValueRef x, std::vector<int64_t> axes = {}, bool keep_dims = false);
ValueRef argmax(Builder& b, ValueRef x, int64_t axis);

}  // namespace mirra::ops
