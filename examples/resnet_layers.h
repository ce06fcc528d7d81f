// The layers the residual networks (and Inception V3) share: a bias-free convolution followed by
// batch normalisation (whose moving statistics' updates the model keeps), in TensorFlow's SAME or
// VALID padding or in PyTorch's symmetric one (torchvision's ResNets pad (k - 1) / 2 on every side,
// which differs from SAME at stride 2 on even sizes).
//
//   ResNetLayers layers{model, b, graph::DType::f32};
//   auto y = ops::relu(b, layers.conv_bn("conv1", x, {.kernel = 7, .in = 3, .out = 64, .stride = 2}));
#pragma once

#include <cstdint>
#include <string>

#include "examples/models.h"

namespace mirra::examples {

struct ConvBnShape {
  int64_t kernel = 3;        // the window's height
  int64_t kernel_width = 0;  // its width; 0: kernel (square)
  int64_t in = 0, out = 0;
  int64_t stride = 1;
  bool symmetric_padding = false;  // (kernel - 1) / 2 on every side (square windows only); else SAME
  bool valid_padding = false;      // no padding at all
};

struct ResNetLayers {
  Classifier& model;
  graph::Builder& b;
  graph::DType dtype;

  // conv (He-normal filter, no bias) then batch normalisation, in scope `name` ("<name>/filter",
  // "<name>/bn/gamma", ...).
  graph::ValueRef conv_bn(const std::string& name, graph::ValueRef x, const ConvBnShape& shape);
};

}  // namespace mirra::examples
