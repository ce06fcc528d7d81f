// Fusion passes: rewrite a finished graph (forward, gradients and updates) so that fewer kernels
// sweep memory.
//   - fuse_conv_bias_relu turns Conv2D -> BiasAdd -> Relu, where nothing else reads the first two, into
//     one FusedConv2D (oneDNN applies the bias and the ReLU as it writes the output).
//   - fuse_max_pool_grad_relu_grad turns ReluGrad(MaxPoolGrad(y, g), y), where y is the ReLU's output
//     that was pooled and nothing else reads the MaxPoolGrad, into one MaxPoolGrad with through_relu:
//     the gradient reaches the window's maximum only where it is positive, in one sweep instead of two.
//   - fuse_max_pool_grad_bias_grad gives a MaxPoolGrad whose output a ReduceSum sums over all but the
//     channel dim (the gradient of the bias added before the ReLU and the pooling) channel_sums: it
//     sums what its windows pass on as it writes them, from dy (a quarter of the elements for 2x2
//     windows), instead of another sweep over its output. The ReduceSum becomes an Identity of the
//     MaxPoolGrad's output 1, so whoever holds its value (the optimizer's list of gradients) still
//     finds it.
//   - fuse_for_training runs the three, in that order.
//
// REQUIRES: a structurally valid graph. ENSURES: every value that was read still exists with the same
// meaning (the chain's last output is the fused node's); the replaced nodes stay in the graph but
// nothing reads them or waits for them, so no plan runs them; control edges to or from them move to
// the fused node. Each returns how many fusions it made.
#pragma once

#include "graph/graph.h"

namespace mirra::ops {

int fuse_conv_bias_relu(graph::Graph& graph);
int fuse_max_pool_grad_relu_grad(graph::Graph& graph);
int fuse_max_pool_grad_bias_grad(graph::Graph& graph);
int fuse_for_training(graph::Graph& graph);

}  // namespace mirra::ops
