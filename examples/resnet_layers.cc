// ResNetLayers::conv_bn.
#include "examples/resnet_layers.h"

#include "ops/ops.h"

namespace mirra::examples {

graph::ValueRef ResNetLayers::conv_bn(const std::string& name, graph::ValueRef x, const ConvBnShape& shape) {
  auto scope = b.scope(name);
  const int64_t width = shape.kernel_width > 0 ? shape.kernel_width : shape.kernel;
  auto filter = ops::variable(b, "filter", {shape.kernel, width, shape.in, shape.out}, ops::Initializer::he_normal(), dtype);
  std::string padding = shape.valid_padding ? "VALID" : "SAME";
  if (shape.symmetric_padding && shape.kernel > 1) {
    const int64_t p = (shape.kernel - 1) / 2;
    x = ops::pad(b, x, {0, 0, p, p, p, p, 0, 0});
    padding = "VALID";
  }
  auto y = ops::conv2d(b, x, filter, {.strides = {shape.stride, shape.stride}, .padding = padding});
  auto scope_bn = b.scope("bn");
  ops::BatchNormalization bn = ops::batch_normalization(b, y);
  model.state_updates.insert(model.state_updates.end(), bn.state_updates.begin(), bn.state_updates.end());
  return bn.y;
}

}  // namespace mirra::examples
