// Weight decay as a term of the loss (Keras's L2 regulariser): factor * the sum of the squares of the
// weights' elements. Added to the loss, its gradient adds 2 * factor * w to each weight's, so it passes
// through momentum and Adam's moments (PyTorch's SGD weight_decay d is factor d / 2). The decoupled
// form (SGDW, AdamW) is Optimizer::weight_decay instead.
//
//   auto loss = ops::add(b, objective.loss, ops::l2_regularization(b, ops::kernel_variables(b.graph()), 5e-4));
#pragma once

#include <string>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// A scalar of the weights' dtype (they must share one); at least one weight.
graph::ValueRef l2_regularization(graph::Builder& b, const std::vector<graph::ValueRef>& weights, double factor);

// The graph's trainable variables whose names contain none of `excluded` (by default batch
// normalisation's gamma and beta and the biases: Keras regularises kernels only).
std::vector<graph::ValueRef> kernel_variables(const graph::Graph& g,
                                              const std::vector<std::string>& excluded = {"gamma", "beta", "bias"});

}  // namespace mirra::ops
