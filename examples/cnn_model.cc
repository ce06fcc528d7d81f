// build_cnn: the TensorFlow-tutorial CNN for 28x28 grey images.
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

graph::ValueRef conv_relu_pool(graph::Builder& b, const char* name, graph::ValueRef x, int64_t in, int64_t out) {
  auto scope = b.scope(name);
  auto filter = ops::variable(b, "filter", {5, 5, in, out}, ops::Initializer::glorot_uniform());
  auto bias = ops::variable(b, "b", {out});
  auto y = ops::relu(b, ops::bias_add(b, ops::conv2d(b, x, filter, {.padding = "SAME"}), bias));
  return ops::max_pool(b, y, {.ksize = {2, 2}, .strides = {2, 2}, .padding = "VALID"});
}

}  // namespace

Classifier build_cnn(graph::Builder& b) {
  Classifier model;
  model.images = ops::placeholder(b, "images", graph::DType::f32, {-1, 28, 28, 1});
  auto x = conv_relu_pool(b, "conv1", model.images, 1, 32);  // [?, 14, 14, 32]
  x = conv_relu_pool(b, "conv2", x, 32, 64);                 // [?, 7, 7, 64]
  x = ops::reshape(b, x, {-1, 7 * 7 * 64});
  x = dense(b, "fc1", x, 7 * 7 * 64, 1024, true);
  model.logits = dense(b, "logits", x, 1024, 10, false);
  return model;
}

}  // namespace mirra::examples
