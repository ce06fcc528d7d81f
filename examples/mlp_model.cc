// build_mlp: 784-256-128-10 with ReLU; and the dense layer both models use.
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

graph::ValueRef dense(graph::Builder& b, const char* name, graph::ValueRef x, int64_t in, int64_t out, bool relu,
                      graph::DType dtype) {
  auto scope = b.scope(name);
  auto w = ops::variable(b, "w", {in, out}, ops::Initializer::glorot_uniform(), dtype);
  auto bias = ops::variable(b, "b", {out}, ops::Initializer::zeros(), dtype);
  auto y = ops::bias_add(b, ops::matmul(b, x, w), bias);
  return relu ? ops::relu(b, y) : y;
}

Classifier build_mlp(graph::Builder& b) {
  Classifier model;
  model.images = ops::placeholder(b, "images", graph::DType::f32, {-1, 28, 28, 1});
  auto x = ops::reshape(b, model.images, {-1, 784});
  x = dense(b, "fc1", x, 784, 256, true);
  x = dense(b, "fc2", x, 256, 128, true);
  model.logits = dense(b, "logits", x, 128, 10, false);
  return model;
}

}  // namespace mirra::examples
