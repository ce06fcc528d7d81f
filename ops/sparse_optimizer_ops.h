// Row-wise optimizer updates, for a variable whose gradient is the rows of its lookups (an embedding
// table's): SparseApplyGradientDescent, SparseApplyMomentum and SparseApplyAdam take the gradient as
// `rows` (indices.shape + variable.shape[1:]) and the `indices` of the variable's rows they belong to
// (i32 or i64; negative ones dropped, as UnsortedSegmentSum drops them; one at or above the
// variable's first dimension an error), and change only the rows named. Rows of one index are added
// in their order first, as UnsortedSegmentSum adds them, so gradient descent on rows computes exactly
// what ApplyGradientDescent computes on their UnsortedSegmentSum. Momentum and Adam update the slots
// of the rows named alone (lazily: TensorFlow's sparse momentum and LazyAdam), which is not what the
// dense updates compute for the other rows. No weight decay (it would change every row). CPU and GPU
// kernels (the GPU's sort the indices as UnsortedSegmentSum's do); ops/sparse_updates.h makes them
// from the dense updates of a training graph.
#pragma once

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::NodeId;
using graph::ValueRef;

struct SparseGradient {
  ValueRef rows, indices;
};

NodeId sparse_apply_gradient_descent(Builder& b, ValueRef variable, const SparseGradient& gradient, ValueRef learning_rate,
                                     ValueRef apply = {});
NodeId sparse_apply_momentum(Builder& b, ValueRef variable, ValueRef accumulator, const SparseGradient& gradient,
                             ValueRef learning_rate, double momentum, bool nesterov, ValueRef apply = {});
struct SparseAdamOperands {
  ValueRef variable, m, v;
  SparseGradient gradient;
  ValueRef learning_rate;
  ValueRef step;  // i64 scalar: updates applied so far
};
NodeId sparse_apply_adam(Builder& b, const SparseAdamOperands& operands, double beta1, double beta2, double epsilon,
                         ValueRef apply = {});

}  // namespace mirra::ops
