// Fusion passes: rewrite a finished graph (forward, gradients and updates) so that fewer kernels
// sweep memory.
//   - fold_padding_into_convolutions turns each Pad of zeros around the height and width that only
//     VALID convolutions read (Conv2D, and its gradients, the input's through the Slice that is Pad's
//     gradient) into their EXPLICIT padding: the padded copy is neither made nor kept for the
//     backward pass (the ResNets pad so, as PyTorch's symmetric padding; ResNet-50 kept 482 MB of
//     them at batch 32).
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
//   - fuse_batch_norm_activation turns Relu(FusedBatchNormV3(x)), and Relu(Add(FusedBatchNormV3(x),
//     s)) with s of the same type (a residual block's sum, either term), where nothing else reads the
//     normalised value or the sum but for its shape, into one FusedBatchNormEx with s as its side
//     input: one sweep writes the ReLU's output, and neither the normalised value nor the sum is kept.
//   - fuse_batch_norm_grad_activation turns FusedBatchNormGradV3(ReluGrad(dr, r)), or of a SumToShape
//     of that to a value of the same type, into one FusedBatchNormGradEx(dr, ..., r): the gradient
//     passes the ReLU as the sums are taken; whoever else read the ReLU's gradient (the side input's
//     path) reads the fused node's output 5. Shapes the graph leaves unknown must agree at run time:
//     the fused kernels refuse tensors of other shapes than x's, never broadcast them.
//   - fuse_for_training runs them all: the padding fold, the two forward fusions, then the three
//     gradient fusions.
//
// REQUIRES: a structurally valid graph. ENSURES: every value that was read still exists with the same
// meaning (the chain's last output is the fused node's); the replaced nodes stay in the graph but
// nothing reads them or waits for them, so no plan runs them; control edges to or from them move to
// the fused node. Each returns how many fusions it made.
#pragma once

#include "graph/graph.h"

namespace mirra::ops {

int fold_padding_into_convolutions(graph::Graph& graph);
int fuse_conv_bias_relu(graph::Graph& graph);
int fuse_batch_norm_activation(graph::Graph& graph);
int fuse_batch_norm_grad_activation(graph::Graph& graph);
int fuse_max_pool_grad_relu_grad(graph::Graph& graph);
int fuse_max_pool_grad_bias_grad(graph::Graph& graph);
int fuse_for_training(graph::Graph& graph);

}  // namespace mirra::ops
