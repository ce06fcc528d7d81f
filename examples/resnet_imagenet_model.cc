// build_resnet18, build_resnet50 and build_resnet101: He et al.'s ImageNet ResNets (arXiv:1512.03385, table 1) as
// torchvision builds them (v1.5: a bottleneck's stride is on its 3x3 convolution): a 7x7/2
// convolution of 64 channels, batch normalisation and ReLU, 3x3/2 max-pooling, four stages at 64,
// 128, 256 and 512 channels (ResNet-18: two basic blocks of two 3x3 convolutions each; ResNet-50: 3,
// 4, 6 and 3 bottleneck blocks of 1x1, 3x3 and 1x1 convolutions, the last four times wider;
// ResNet-101: 3, 4, 23 and 3 of them), the first
// block of stages 2-4 at stride 2, projection shortcuts (a 1x1 convolution and batch normalisation)
// where the shape changes, global average pooling and a dense layer with bias. Padding is symmetric,
// as torchvision's. ResNet-50 has 25,557,032 trainable parameters, ResNet-101 44,549,160, ResNet-18
// 11,689,512.
#include "examples/models.h"
#include "examples/resnet_layers.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

struct Network {
  ResNetLayers layers;
  graph::Builder& b;

  graph::ValueRef conv_bn(const std::string& name, graph::ValueRef x, int64_t kernel, int64_t in, int64_t out,
                          int64_t stride) {
    return layers.conv_bn(name, x, {.kernel = kernel, .in = in, .out = out, .stride = stride, .symmetric_padding = true});
  }

  // The input as it is, or projected to `out` channels at `stride` where the block changes its shape.
  graph::ValueRef shortcut(graph::ValueRef x, int64_t in, int64_t out, int64_t stride) {
    return in == out && stride == 1 ? x : conv_bn("shortcut", x, 1, in, out, stride);
  }

  // relu(shortcut + bn(conv3x3(relu(bn(conv3x3(x)))))).
  graph::ValueRef basic_block(graph::ValueRef x, int64_t in, int64_t width, int64_t stride) {
    graph::ValueRef y = ops::relu(b, conv_bn("conv1", x, 3, in, width, stride));
    y = conv_bn("conv2", y, 3, width, width, 1);
    return ops::relu(b, ops::add(b, y, shortcut(x, in, width, stride)));
  }

  // relu(shortcut + bn(conv1x1(relu(bn(conv3x3(relu(bn(conv1x1(x))))))))), 4 x width channels out.
  graph::ValueRef bottleneck_block(graph::ValueRef x, int64_t in, int64_t width, int64_t stride) {
    graph::ValueRef y = ops::relu(b, conv_bn("conv1", x, 1, in, width, 1));
    y = ops::relu(b, conv_bn("conv2", y, 3, width, width, stride));
    y = conv_bn("conv3", y, 1, width, 4 * width, 1);
    return ops::relu(b, ops::add(b, y, shortcut(x, in, 4 * width, stride)));
  }
};

Classifier build_imagenet_resnet(graph::Builder& b, const ResNetOptions& options, const std::vector<int>& blocks,
                                 bool bottleneck) {
  Classifier model;
  const std::vector<int64_t>& image = options.image;
  model.images = ops::placeholder(b, "images", options.dtype, {-1, image[0], image[1], image[2]});
  Network net{{model, b, options.dtype}, b};
  graph::ValueRef x = ops::relu(b, net.conv_bn("stem", model.images, 7, image[2], options.width, 2));  // [?, 112, 112, 64]
  // Zero padding is the max-pool's -infinity padding here: the ReLU's outputs are never negative.
  x = ops::max_pool(b, ops::pad(b, x, {0, 0, 1, 1, 1, 1, 0, 0}), {.ksize = {3, 3}, .strides = {2, 2}});  // 56x56
  int64_t channels = options.width;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int64_t width = options.width << stage;
    for (int block = 0; block < blocks[stage]; ++block) {
      auto scope = b.scope("stage" + std::to_string(stage + 1) + "/block" + std::to_string(block + 1));
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      x = bottleneck ? net.bottleneck_block(x, channels, width, stride) : net.basic_block(x, channels, width, stride);
      channels = bottleneck ? 4 * width : width;
    }
  }  // [?, 7, 7, 512 or 2048]
  x = ops::reduce_mean(b, x, {1, 2});  // global average pooling
  model.logits = dense(b, "logits", x, channels, options.classes, false, options.dtype);
  return model;
}

}  // namespace

Classifier build_resnet18(graph::Builder& b, const ResNetOptions& options) {
  return build_imagenet_resnet(b, options, {2, 2, 2, 2}, /*bottleneck=*/false);
}

Classifier build_resnet50(graph::Builder& b, const ResNetOptions& options) {
  return build_imagenet_resnet(b, options, {3, 4, 6, 3}, /*bottleneck=*/true);
}

Classifier build_resnet101(graph::Builder& b, const ResNetOptions& options) {
  return build_imagenet_resnet(b, options, {3, 4, 23, 3}, /*bottleneck=*/true);
}

Classifier build_resnet18(graph::Builder& b) { return build_resnet18(b, {}); }
Classifier build_resnet50(graph::Builder& b) { return build_resnet50(b, {}); }
Classifier build_resnet101(graph::Builder& b) { return build_resnet101(b, {}); }

}  // namespace mirra::examples
