// build_inception_v3: Szegedy et al.'s Inception V3 (arXiv:1512.00567) as torchvision builds it, for
// 299x299x3 images in 1,000 classes, without the auxiliary classifier (whose cost is under 1% of a
// step): every convolution bias-free with batch normalisation and ReLU; a stem of 3x3 convolutions
// (32/2 VALID, 32 VALID, 64), a 3x3/2 max-pool, 1x1 80 and 3x3 192 VALID, a 3x3/2 max-pool (35x35);
// three A modules (1x1; 1x1 then 5x5; 1x1 then two 3x3; average pool then 1x1), the B reduction to
// 17x17, four C modules with factorised 7x7 convolutions (1x7 and 7x1), the D reduction to 8x8, two
// E modules with split 1x3 and 3x1 branches (2,048 channels), global average pooling and a dense
// layer with bias. 23,834,568 trainable parameters.
#include "examples/models.h"
#include "examples/resnet_layers.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

struct Inception {
  ResNetLayers layers;
  graph::Builder& b;

  // conv (kh x kw, SAME unless `valid`) + batch normalisation + ReLU.
  graph::ValueRef conv(const std::string& name, graph::ValueRef x, int64_t in, int64_t out, int64_t kh, int64_t kw,
                       int64_t stride = 1, bool valid = false) {
    return ops::relu(b, layers.conv_bn(name, x, {.kernel = kh, .kernel_width = kw, .in = in, .out = out, .stride = stride,
                                                 .valid_padding = valid}));
  }
  graph::ValueRef max_pool(graph::ValueRef x) {
    return ops::max_pool(b, x, {.ksize = {3, 3}, .strides = {2, 2}, .padding = "VALID"});
  }
  graph::ValueRef avg_pool(graph::ValueRef x) {
    return ops::avg_pool(b, x, {.ksize = {3, 3}, .strides = {1, 1}, .padding = "SAME"});
  }

  // 64 + 64 + 96 + pool_features channels.
  graph::ValueRef module_a(graph::ValueRef x, int64_t in, int64_t pool_features) {
    const auto b1 = conv("branch1x1", x, in, 64, 1, 1);
    const auto b5 = conv("branch5x5_2", conv("branch5x5_1", x, in, 48, 1, 1), 48, 64, 5, 5);
    auto b3 = conv("branch3x3dbl_1", x, in, 64, 1, 1);
    b3 = conv("branch3x3dbl_3", conv("branch3x3dbl_2", b3, 64, 96, 3, 3), 96, 96, 3, 3);
    const auto pool = conv("branch_pool", avg_pool(x), in, pool_features, 1, 1);
    return ops::concat(b, {b1, b5, b3, pool}, 3);
  }
  // 35x35x288 to 17x17x768.
  graph::ValueRef module_b(graph::ValueRef x, int64_t in) {
    const auto b3 = conv("branch3x3", x, in, 384, 3, 3, 2, true);
    auto d = conv("branch3x3dbl_1", x, in, 64, 1, 1);
    d = conv("branch3x3dbl_3", conv("branch3x3dbl_2", d, 64, 96, 3, 3), 96, 96, 3, 3, 2, true);
    return ops::concat(b, {b3, d, max_pool(x)}, 3);
  }
  // 768 channels in and out; c7 channels inside the factorised 7x7 branches.
  graph::ValueRef module_c(graph::ValueRef x, int64_t c7) {
    const auto b1 = conv("branch1x1", x, 768, 192, 1, 1);
    auto b7 = conv("branch7x7_1", x, 768, c7, 1, 1);
    b7 = conv("branch7x7_3", conv("branch7x7_2", b7, c7, c7, 1, 7), c7, 192, 7, 1);
    auto d = conv("branch7x7dbl_1", x, 768, c7, 1, 1);
    d = conv("branch7x7dbl_3", conv("branch7x7dbl_2", d, c7, c7, 7, 1), c7, c7, 1, 7);
    d = conv("branch7x7dbl_5", conv("branch7x7dbl_4", d, c7, c7, 7, 1), c7, 192, 1, 7);
    const auto pool = conv("branch_pool", avg_pool(x), 768, 192, 1, 1);
    return ops::concat(b, {b1, b7, d, pool}, 3);
  }
  // 17x17x768 to 8x8x1280.
  graph::ValueRef module_d(graph::ValueRef x) {
    const auto b3 = conv("branch3x3_2", conv("branch3x3_1", x, 768, 192, 1, 1), 192, 320, 3, 3, 2, true);
    auto b7 = conv("branch7x7x3_1", x, 768, 192, 1, 1);
    b7 = conv("branch7x7x3_3", conv("branch7x7x3_2", b7, 192, 192, 1, 7), 192, 192, 7, 1);
    b7 = conv("branch7x7x3_4", b7, 192, 192, 3, 3, 2, true);
    return ops::concat(b, {b3, b7, max_pool(x)}, 3);
  }
  // 2,048 channels out: 320 + 2 x 384 + 2 x 384 + 192.
  graph::ValueRef module_e(graph::ValueRef x, int64_t in) {
    const auto b1 = conv("branch1x1", x, in, 320, 1, 1);
    const auto b3 = conv("branch3x3_1", x, in, 384, 1, 1);
    const auto b3a = conv("branch3x3_2a", b3, 384, 384, 1, 3);
    const auto b3b = conv("branch3x3_2b", b3, 384, 384, 3, 1);
    const auto d = conv("branch3x3dbl_2", conv("branch3x3dbl_1", x, in, 448, 1, 1), 448, 384, 3, 3);
    const auto da = conv("branch3x3dbl_3a", d, 384, 384, 1, 3);
    const auto db = conv("branch3x3dbl_3b", d, 384, 384, 3, 1);
    const auto pool = conv("branch_pool", avg_pool(x), in, 192, 1, 1);
    return ops::concat(b, {b1, b3a, b3b, da, db, pool}, 3);
  }
};

}  // namespace

Classifier build_inception_v3(graph::Builder& b) {
  Classifier model;
  model.images = ops::placeholder(b, "images", graph::DType::f32, {-1, 299, 299, 3});
  Inception net{{model, b, graph::DType::f32}, b};
  graph::ValueRef x = net.conv("Conv2d_1a_3x3", model.images, 3, 32, 3, 3, 2, true);  // 149
  x = net.conv("Conv2d_2a_3x3", x, 32, 32, 3, 3, 1, true);                            // 147
  x = net.conv("Conv2d_2b_3x3", x, 32, 64, 3, 3);                                     // 147
  x = net.max_pool(x);                                                                // 73
  x = net.conv("Conv2d_3b_1x1", x, 64, 80, 1, 1);
  x = net.conv("Conv2d_4a_3x3", x, 80, 192, 3, 3, 1, true);                           // 71
  x = net.max_pool(x);                                                                // 35
  const auto scoped = [&](const char* name, auto&& module) {
    auto scope = b.scope(name);
    return module();
  };
  x = scoped("Mixed_5b", [&] { return net.module_a(x, 192, 32); });  // 256
  x = scoped("Mixed_5c", [&] { return net.module_a(x, 256, 64); });  // 288
  x = scoped("Mixed_5d", [&] { return net.module_a(x, 288, 64); });  // 288
  x = scoped("Mixed_6a", [&] { return net.module_b(x, 288); });      // 17x17x768
  x = scoped("Mixed_6b", [&] { return net.module_c(x, 128); });
  x = scoped("Mixed_6c", [&] { return net.module_c(x, 160); });
  x = scoped("Mixed_6d", [&] { return net.module_c(x, 160); });
  x = scoped("Mixed_6e", [&] { return net.module_c(x, 192); });
  x = scoped("Mixed_7a", [&] { return net.module_d(x); });           // 8x8x1280
  x = scoped("Mixed_7b", [&] { return net.module_e(x, 1280); });     // 2048
  x = scoped("Mixed_7c", [&] { return net.module_e(x, 2048); });
  x = ops::reduce_mean(b, x, {1, 2});  // global average pooling
  model.logits = dense(b, "logits", x, 2048, 1000, false);
  return model;
}

}  // namespace mirra::examples
