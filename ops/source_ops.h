// Source ops (no inputs): Placeholder (fed at run time), Const (a value stored in the graph),
// Variable (state kept by the session, created from its initialiser), Fill (a constant-valued tensor).
#pragma once

#include <span>
#include <string_view>

#include "graph/builder.h"
#include "ops/initializers.h"

namespace mirra::ops {

using graph::Builder;
using graph::DType;
using graph::Shape;
using graph::ValueRef;

ValueRef placeholder(Builder& b, std::string_view name, DType dtype, Shape shape);
ValueRef constant(Builder& b, graph::TensorValue value, std::string_view name = "Const");
ValueRef scalar(Builder& b, float value);
template <class T>
ValueRef constant(Builder& b, Shape shape, std::span<const T> values) {
  return constant(b, graph::TensorValue::from<T>(std::move(shape), values));
}
// A variable of fully defined `shape`; random initialisers draw from b.next_seed(). Optimizers update
// trainable ones; non-trainable ones hold other state (optimizer slots, counters).
ValueRef variable(Builder& b, std::string_view name, Shape shape, Initializer init = Initializer::zeros(),
                  DType dtype = DType::f32, bool trainable = true);
ValueRef fill(Builder& b, Shape shape, double value, DType dtype = DType::f32);
// A scalar `value` of the same dtype as `like` (for constants in gradient rules).
ValueRef scalar_of(Builder& b, double value, ValueRef like);

}  // namespace mirra::ops
