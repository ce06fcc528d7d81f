// build_resnet20: He et al.'s CIFAR ResNet-20 (arXiv:1512.03385, section 4.2) for 28x28x1 images:
// a 3x3 convolution of 16 channels, three stages of three basic blocks (two 3x3 convolutions, each
// followed by batch normalisation, ReLU after the first and after the residual sum) at 16, 32 and 64
// channels, the first block of stages 2 and 3 at stride 2, global average pooling and a dense layer
// of 10. Shortcuts are the paper's option A: the identity, and where the shape changes the input
// subsampled at stride 2 and zero-padded in its channels, so they add no parameters (about 0.27M in
// all). Convolutions have no bias (batch normalisation's beta is one) and start He-normal.
#include "examples/models.h"
#include "examples/resnet_layers.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

struct Stage {
  ResNetLayers layers;
  graph::Builder& b;

  // Convolution 3x3 (SAME) at `stride`, then batch normalisation.
  graph::ValueRef conv_bn(const std::string& name, graph::ValueRef x, int64_t in, int64_t out, int64_t stride) {
    return layers.conv_bn(name, x, {.kernel = 3, .in = in, .out = out, .stride = stride});
  }

  // x[:, ::stride, ::stride, :] (NHWC): rows and columns padded to a multiple of the stride where they
  // are not one, each split into (index / stride, index % stride), and the first of each group kept.
  graph::ValueRef subsample(graph::ValueRef x, int64_t stride) {
    const graph::Shape& shape = b.type(x).shape;
    const int64_t h = (shape.dim(1) + stride - 1) / stride, w = (shape.dim(2) + stride - 1) / stride, c = shape.dim(3);
    if (h * stride != shape.dim(1) || w * stride != shape.dim(2)) {
      x = ops::pad(b, x, {0, 0, 0, h * stride - shape.dim(1), 0, w * stride - shape.dim(2), 0, 0});
    }
    x = ops::reshape(b, x, {-1, h, stride, w, stride, c});
    x = ops::slice(b, x, {0, 0, 0, 0, 0, 0}, {-1, h, 1, w, 1, c});
    return ops::reshape(b, x, {-1, h, w, c});
  }

  // relu(x' + bn(conv(relu(bn(conv(x)))))), x' the shortcut.
  graph::ValueRef basic_block(const std::string& name, graph::ValueRef x, int64_t in, int64_t out, int64_t stride) {
    auto scope = b.scope(name);
    graph::ValueRef y = ops::relu(b, conv_bn("conv1", x, in, out, stride));
    y = conv_bn("conv2", y, out, out, 1);
    graph::ValueRef shortcut = x;
    if (stride != 1) shortcut = subsample(shortcut, stride);
    if (out != in) shortcut = ops::pad(b, shortcut, {0, 0, 0, 0, 0, 0, 0, out - in});
    return ops::relu(b, ops::add(b, y, shortcut));
  }
};

}  // namespace

Classifier build_resnet20(graph::Builder& b) { return build_resnet20(b, {}); }

Classifier build_resnet20(graph::Builder& b, const ResNet20Options& options) {
  Classifier model;
  const std::vector<int64_t>& image = options.image;
  model.images = ops::placeholder(b, "images", options.dtype, {-1, image[0], image[1], image[2]});
  Stage net{{model, b, options.dtype}, b};
  const int64_t width = options.width;
  graph::ValueRef x = ops::relu(b, net.conv_bn("stem", model.images, image[2], width, 1));  // [?, 28, 28, 16]
  int64_t channels = width;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t out = width << stage;
    for (int block = 0; block < 3; ++block) {
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      x = net.basic_block("stage" + std::to_string(stage + 1) + "/block" + std::to_string(block + 1), x, channels, out, stride);
      channels = out;
    }
  }  // [?, 7, 7, 64]
  x = ops::reduce_mean(b, x, {1, 2});  // global average pooling: [?, 64]
  model.logits = dense(b, "logits", x, channels, options.classes, false, options.dtype);
  return model;
}

}  // namespace mirra::examples
