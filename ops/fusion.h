// Fusion passes: rewrite a finished graph (forward, gradients and updates) so that fewer kernels
// sweep memory.
//   - fuse_conv_bias_relu turns Conv2D -> BiasAdd -> Relu, where nothing else reads the first two, into
//     one FusedConv2D (oneDNN applies the bias and the ReLU as it writes the output).
//   - fuse_max_pool_grad_relu_grad turns ReluGrad(MaxPoolGrad(y, g), y), where y is the ReLU's output
//     that was pooled and nothing else reads the MaxPoolGrad, into one MaxPoolGrad with through_relu:
//     the gradient reaches the window's maximum only where it is positive, in one sweep instead of two.
//   - fuse_for_training runs both, in that order.
//
// REQUIRES: a structurally valid graph. ENSURES: every value that was read still exists with the same
// meaning (the chain's last output is the fused node's); the replaced nodes stay in the graph but
// nothing reads them or waits for them, so no plan runs them; control edges to or from them move to
// the fused node. Each returns how many chains it fused.
#pragma once

#include "graph/graph.h"

namespace mirra::ops {

int fuse_conv_bias_relu(graph::Graph& graph);
int fuse_max_pool_grad_relu_grad(graph::Graph& graph);
int fuse_for_training(graph::Graph& graph);

}  // namespace mirra::ops
