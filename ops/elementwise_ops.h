// Element-wise ops. Unary (f32, f64): Neg, Exp, Log, Sqrt, Rsqrt, Square, Relu, Sigmoid, Tanh, Abs,
// Sign, Erf, Softplus, Gelu (attr approximate: erf or tanh). Binary with NumPy broadcasting (f32, f64,
// i32, i64): Add, Sub, Mul, Div, Maximum, Minimum, and the comparisons Equal, NotEqual, Less,
// LessEqual, Greater, GreaterEqual (to bool). ReluGrad and SumToShape serve gradients.
#pragma once

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

ValueRef neg(Builder& b, ValueRef x);
ValueRef exp(Builder& b, ValueRef x);
ValueRef log(Builder& b, ValueRef x);
ValueRef sqrt(Builder& b, ValueRef x);
ValueRef rsqrt(Builder& b, ValueRef x);
ValueRef square(Builder& b, ValueRef x);
ValueRef relu(Builder& b, ValueRef x);
ValueRef sigmoid(Builder& b, ValueRef x);
ValueRef tanh(Builder& b, ValueRef x);
ValueRef abs(Builder& b, ValueRef x);
ValueRef sign(Builder& b, ValueRef x);
ValueRef erf(Builder& b, ValueRef x);
ValueRef softplus(Builder& b, ValueRef x);
// x * P(X <= x), X standard normal; `approximate`: with tanh (GPT-2's), else with erf.
ValueRef gelu(Builder& b, ValueRef x, bool approximate = false);

ValueRef add(Builder& b, ValueRef x, ValueRef y);
ValueRef sub(Builder& b, ValueRef x, ValueRef y);
ValueRef mul(Builder& b, ValueRef x, ValueRef y);
ValueRef div(Builder& b, ValueRef x, ValueRef y);
ValueRef maximum(Builder& b, ValueRef x, ValueRef y);
ValueRef minimum(Builder& b, ValueRef x, ValueRef y);
ValueRef equal(Builder& b, ValueRef x, ValueRef y);
ValueRef not_equal(Builder& b, ValueRef x, ValueRef y);
ValueRef less(Builder& b, ValueRef x, ValueRef y);
ValueRef less_equal(Builder& b, ValueRef x, ValueRef y);
ValueRef greater(Builder& b, ValueRef x, ValueRef y);
ValueRef greater_equal(Builder& b, ValueRef x, ValueRef y);
// x summed over the dims along which `like` broadcasts to x's shape, so it has like's shape.
ValueRef sum_to_shape(Builder& b, ValueRef x, ValueRef like);

}  // namespace mirra::ops
