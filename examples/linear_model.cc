// build_linear: linear regression, predictions = inputs * w + b.
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

Regressor build_linear(graph::Builder& b, int64_t features, int64_t outputs) {
  Regressor model;
  model.inputs = ops::placeholder(b, "inputs", graph::DType::f32, {-1, features});
  auto scope = b.scope("linear");
  auto w = ops::variable(b, "w", {features, outputs}, ops::Initializer::zeros());
  auto bias = ops::variable(b, "b", {outputs}, ops::Initializer::zeros());
  model.predictions = ops::bias_add(b, ops::matmul(b, model.inputs, w), bias);
  return model;
}

}  // namespace mirra::examples
