// Conv2D: 2-D convolution (cross-correlation, as TensorFlow) of an NHWC or NCHW input with an HWIO
// filter [kh, kw, in, out]; SAME or VALID padding, strides, dilations; f32, through oneDNN.
#pragma once

#include "graph/builder.h"
#include "ops/nn_options.h"

namespace mirra::ops {

graph::ValueRef conv2d(graph::Builder& b, graph::ValueRef input, graph::ValueRef filter,
                       const Conv2DOptions& options = {});

}  // namespace mirra::ops
