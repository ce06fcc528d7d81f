// build_vgg16: Simonyan and Zisserman's VGG-16 (arXiv:1409.1556, configuration D) at ImageNet's
// shapes: thirteen 3x3 convolutions (SAME, with bias and ReLU) in five blocks of 64, 128, 256, 512
// and 512 channels, each block ending in a 2x2/2 max-pool, then dense layers of 4,096, 4,096 and
// 1,000 units (ReLU between them; the paper's dropout is left out: its cost is element-wise).
// 138,357,544 trainable parameters, 124M of them in the dense layers: the all-reduce-heavy model of
// the Horovod paper's figures.
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

graph::ValueRef conv_relu(graph::Builder& b, const std::string& name, graph::ValueRef x, int64_t in, int64_t out) {
  auto scope = b.scope(name);
  auto filter = ops::variable(b, "filter", {3, 3, in, out}, ops::Initializer::he_normal());
  auto bias = ops::variable(b, "b", {out});
  return ops::relu(b, ops::bias_add(b, ops::conv2d(b, x, filter, {.padding = "SAME"}), bias));
}

}  // namespace

Classifier build_vgg16(graph::Builder& b) {
  Classifier model;
  model.images = ops::placeholder(b, "images", graph::DType::f32, {-1, 224, 224, 3});
  constexpr int64_t kBlocks[][2] = {{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}};  // channels, convolutions
  graph::ValueRef x = model.images;
  int64_t channels = 3;
  for (size_t block = 0; block < std::size(kBlocks); ++block) {
    const auto [width, convolutions] = kBlocks[block];
    for (int64_t i = 0; i < convolutions; ++i) {
      x = conv_relu(b, "block" + std::to_string(block + 1) + "/conv" + std::to_string(i + 1), x, channels, width);
      channels = width;
    }
    x = ops::max_pool(b, x, {.ksize = {2, 2}, .strides = {2, 2}, .padding = "VALID"});
  }  // [?, 7, 7, 512]
  x = ops::reshape(b, x, {-1, 7 * 7 * 512});
  x = dense(b, "fc1", x, 7 * 7 * 512, 4096, true);
  x = dense(b, "fc2", x, 4096, 4096, true);
  model.logits = dense(b, "logits", x, 4096, 1000, false);
  return model;
}

}  // namespace mirra::examples
