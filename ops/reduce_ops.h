// Reductions: ReduceSum, ReduceMean, ReduceMax over all axes or a list of them, optionally keeping
// reduced dims as 1; ArgMax along one axis (to i64). As in TensorFlow, an absent axis list reduces
// over every axis (tf.reduce_sum(x)) and an empty one over none (tf.raw_ops.Sum(x, axis=[])). Each
// output element sums in a fixed order, whatever the thread count, so results are deterministic.
//
//   ops::reduce_mean(b, x);                // a scalar
//   ops::reduce_sum(b, x, {-1}, true);     // over the last axis, kept as 1
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

// The axes a reduction runs over: a list (`{}` is the empty list: none), or Axes::all().
class Axes {
 public:
  Axes(std::initializer_list<int64_t> axes) : list_(axes) {}
  Axes(std::vector<int64_t> axes) : list_(std::move(axes)) {}  // NOLINT: implicit by design
  static Axes all() { return Axes(std::nullopt); }
  const std::optional<std::vector<int64_t>>& list() const { return list_; }

 private:
  explicit Axes(std::nullopt_t) {}
  std::optional<std::vector<int64_t>> list_;
};

ValueRef reduce_sum(Builder& b, ValueRef x, Axes axes = Axes::all(), bool keep_dims = false);
ValueRef reduce_mean(Builder& b, ValueRef x, Axes axes = Axes::all(), bool keep_dims = false);
ValueRef reduce_max(Builder& b, ValueRef x, Axes axes = Axes::all(), bool keep_dims = false);
ValueRef argmax(Builder& b, ValueRef x, int64_t axis);

}  // namespace mirra::ops
