// tiny_model: built with the C++ API; weights with distinct, exactly representable values.
#include "tests/serialization/tiny_model.h"

#include "ops/ops.h"

namespace mirra::testing {

serialization::Model tiny_model() {
  serialization::Model model;
  graph::Builder b(model.graph, ops::registry(), /*seed=*/3);
  auto images = ops::placeholder(b, "images", graph::DType::f32, {-1, 2, 2, 1});
  auto x = ops::reshape(b, images, {-1, 4});
  auto w = ops::variable(b, "dense/w", {4, 3}, ops::Initializer::glorot_uniform());
  auto bias = ops::variable(b, "dense/b", {3});
  auto logits = ops::mul(b, ops::bias_add(b, ops::matmul(b, x, w), bias), ops::scalar(b, 0.5f));
  auto objective = ops::classifier_objective(b, logits);
  MIRRA_CHECK(b.status().ok(), b.status().message());
  const ops::Optimizer optimizer = ops::Optimizer::momentum_sgd(0.1, 0.9);
  model.signature = {.features = "images",
                     .labels = "labels",
                     .loss = objective.loss,
                     .metrics = {{"correct", objective.correct}},
                     .optimizer = {.kind = optimizer.kind, .hyper_parameters = ops::optimizer_hyper_parameters(optimizer)}};
  std::vector<float> w_values(12), b_values = {0.25f, -0.5f, 0.125f};
  for (size_t i = 0; i < w_values.size(); ++i) w_values[i] = static_cast<float>(i) / 8.0f - 0.75f;
  model.weights = {{"dense/w", graph::TensorValue::from<float>(graph::Shape{4, 3}, w_values)},
                   {"dense/b", graph::TensorValue::from<float>(graph::Shape{3}, b_values)}};
  model.metadata = {.producer = "mirra tests", .created = "2026-01-01T00:00:00Z", .description = "tiny"};
  return model;
}

serialization::Model tiny_cnn_model() {
  serialization::Model model;
  graph::Builder b(model.graph, ops::registry(), /*seed=*/5);
  auto images = ops::placeholder(b, "images", graph::DType::f32, {-1, 4, 4, 1});
  auto filter = ops::variable(b, "conv/filter", {3, 3, 1, 2}, ops::Initializer::he_uniform());
  auto x = ops::max_pool(b, ops::relu(b, ops::conv2d(b, images, filter)));
  x = ops::reshape(b, x, {-1, 8});
  auto w = ops::variable(b, "dense/w", {8, 3}, ops::Initializer::glorot_uniform());
  auto objective = ops::classifier_objective(b, ops::matmul(b, x, w));
  MIRRA_CHECK(b.status().ok(), b.status().message());
  const ops::Optimizer optimizer = ops::Optimizer::adam(0.01);
  model.signature = {.features = "images",
                     .labels = "labels",
                     .loss = objective.loss,
                     .metrics = {{"correct", objective.correct}},
                     .optimizer = {.kind = optimizer.kind,
                                   .hyper_parameters = ops::optimizer_hyper_parameters(optimizer),
                                   .state = {{"optimizer/iterations",
                                              graph::TensorValue::from<int64_t>(graph::Shape{}, std::vector<int64_t>{7})}}}};
  model.metadata = {.producer = "mirra tests", .created = "2026-01-01T00:00:00Z", .description = "tiny cnn"};
  return model;
}

serialization::Model tiny_sized_model() {
  serialization::Model model;
  graph::Builder b(model.graph, ops::registry(), /*seed=*/7);
  auto images = ops::placeholder(b, "images", graph::DType::f32, {-1, 2, 2, 1});
  auto padded = ops::pad(b, images, {0, 0, 1, 1, 1, 1, 0, 0}, 0.5);
  auto middle = ops::slice(b, padded, {0, 1, 1, 0}, {-1, 2, 2, 1});
  const auto halves = ops::split(b, middle, 1, 2);
  auto x = ops::reshape(b, ops::concat(b, halves, 1), {-1, 4});
  auto w = ops::add(b, ops::variable(b, "dense/w", {4, 3}, ops::Initializer::glorot_uniform()), ops::fill(b, {4, 3}, 0.25));
  auto hint = ops::one_hot(b, ops::argmax(b, x, 1), 3);
  auto objective = ops::classifier_objective(b, ops::add(b, ops::matmul(b, x, w), hint));
  MIRRA_CHECK(b.status().ok(), b.status().message());
  const ops::Optimizer optimizer = ops::Optimizer::sgd(0.1);
  model.signature = {.features = "images",
                     .labels = "labels",
                     .loss = objective.loss,
                     .metrics = {{"correct", objective.correct}},
                     .optimizer = {.kind = optimizer.kind, .hyper_parameters = ops::optimizer_hyper_parameters(optimizer)}};
  model.metadata = {.producer = "mirra tests", .created = "2026-01-01T00:00:00Z", .description = "tiny sized"};
  return model;
}

}  // namespace mirra::testing
