// Element-wise ops. Unary (f32, f64): Neg, Exp, Log, Sqrt, Rsqrt, Square, Relu, Sigmoid, Tanh, Abs,
// Sign, Erf, Softplus, Gelu (attr approximate: erf or tanh), LeakyRelu (attr alpha); LogicalNot of
// bools. Binary with NumPy broadcasting (f32, f64, i32, i64): Add, Sub, Mul, Div, Maximum, Minimum,
// Pow (f32, f64), the comparisons Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual (to bool),
// LogicalAnd and LogicalOr (of bools). SelectV2 picks between two tensors by a bool condition, all
// three broadcast together. ReluGrad, GeluGrad and SumToShape serve gradients.
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
// x where x > 0, else alpha * x.
ValueRef leaky_relu(Builder& b, ValueRef x, double alpha = 0.2);
ValueRef logical_not(Builder& b, ValueRef x);

ValueRef add(Builder& b, ValueRef x, ValueRef y);
ValueRef sub(Builder& b, ValueRef x, ValueRef y);
ValueRef mul(Builder& b, ValueRef x, ValueRef y);
ValueRef div(Builder& b, ValueRef x, ValueRef y);
ValueRef maximum(Builder& b, ValueRef x, ValueRef y);
ValueRef minimum(Builder& b, ValueRef x, ValueRef y);
ValueRef pow(Builder& b, ValueRef x, ValueRef y);
ValueRef equal(Builder& b, ValueRef x, ValueRef y);
ValueRef not_equal(Builder& b, ValueRef x, ValueRef y);
ValueRef less(Builder& b, ValueRef x, ValueRef y);
ValueRef less_equal(Builder& b, ValueRef x, ValueRef y);
ValueRef greater(Builder& b, ValueRef x, ValueRef y);
ValueRef greater_equal(Builder& b, ValueRef x, ValueRef y);
ValueRef logical_and(Builder& b, ValueRef x, ValueRef y);
ValueRef logical_or(Builder& b, ValueRef x, ValueRef y);
// then_value where condition holds, else else_value; the three broadcast together (TensorFlow's SelectV2).
ValueRef select(Builder& b, ValueRef condition, ValueRef then_value, ValueRef else_value);
// x summed over the dims along which `like` broadcasts to x's shape, so it has like's shape.
ValueRef sum_to_shape(Builder& b, ValueRef x, ValueRef like);

}  // namespace mirra::ops
