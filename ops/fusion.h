// Fusion passes: rewrite a finished graph (forward, gradients and updates) so that fewer kernels
// sweep memory. fuse_conv_bias_relu turns Conv2D -> BiasAdd -> Relu, where nothing else reads the
// first two, into one FusedConv2D (oneDNN applies the bias and the ReLU as it writes the output).
//
// REQUIRES: a structurally valid graph. ENSURES: every value that was read still exists with the same
// meaning (the Relu's output is the fused node's); the replaced nodes stay in the graph but nothing
// reads them or waits for them, so no plan runs them; control edges to or from them move to the
// fused node. Returns how many chains it fused.
#pragma once

#include "graph/graph.h"

namespace mirra::ops {

int fuse_conv_bias_relu(graph::Graph& graph);

}  // namespace mirra::ops
