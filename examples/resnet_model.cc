// build_resnet20: He et al.'s CIFAR ResNet-20 (arXiv:1512.03385, section 4.2) for 28x28x1 images:
// a 3x3 convolution of 16 channels, three stages of three basic blocks (two 3x3 convolutions, each
// followed by batch normalisation, ReLU after the first and after the residual sum) at 16, 32 and 64
// channels, the first block of stages 2 and 3 at stride 2, global average pooling and a dense layer
// of 10. Shortcuts are the paper's option A: the identity, and where the shape changes the input
// subsampled at stride 2 and zero-padded in its channels, so they add no parameters (about 0.27M in
// all). Convolutions have no bias (batch normalisation's beta is one) and start He-normal.
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

struct Stage {
  Classifier& model;
  graph::Builder& b;

  // Convolution 3x3 at `stride`, then batch normalisation; its moving statistics' updates are kept.
  graph::ValueRef conv_bn(const std::string& name, graph::ValueRef x, int64_t in, int64_t out, int64_t stride) {
    auto scope = b.scope(name);
    auto filter = ops::variable(b, "filter", {3, 3, in, out}, ops::Initializer::he_normal());
    auto y = ops::conv2d(b, x, filter, {.strides = {stride, stride}, .padding = "SAME"});
    auto scope_bn = b.scope("bn");
    ops::BatchNormalization bn = ops::batch_normalization(b, y);
    model.state_updates.insert(model.state_updates.end(), bn.state_updates.begin(), bn.state_updates.end());
    return bn.y;
  }

  // relu(x' + bn(conv(relu(bn(conv(x)))))), x' the shortcut.
  graph::ValueRef basic_block(const std::string& name, graph::ValueRef x, int64_t in, int64_t out, int64_t stride) {
    auto scope = b.scope(name);
    graph::ValueRef y = ops::relu(b, conv_bn("conv1", x, in, out, stride));
    y = conv_bn("conv2", y, out, out, 1);
    graph::ValueRef shortcut = x;
    if (stride != 1) shortcut = ops::max_pool(b, shortcut, {.ksize = {1, 1}, .strides = {stride, stride}});
    if (out != in) shortcut = ops::pad(b, shortcut, {0, 0, 0, 0, 0, 0, 0, out - in});
    return ops::relu(b, ops::add(b, y, shortcut));
  }
};

}  // namespace

Classifier build_resnet20(graph::Builder& b) {
  Classifier model;
  model.images = ops::placeholder(b, "images", graph::DType::f32, {-1, 28, 28, 1});
  Stage net{model, b};
  graph::ValueRef x = ops::relu(b, net.conv_bn("stem", model.images, 1, 16, 1));  // [?, 28, 28, 16]
  int64_t channels = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t out = 16 << stage;
    for (int block = 0; block < 3; ++block) {
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      x = net.basic_block("stage" + std::to_string(stage + 1) + "/block" + std::to_string(block + 1), x, channels, out, stride);
      channels = out;
    }
  }  // [?, 7, 7, 64]
  x = ops::reduce_mean(b, x, {1, 2});  // global average pooling: [?, 64]
  model.logits = dense(b, "logits", x, 64, 10, false);
  return model;
}

}  // namespace mirra::examples
