// regression_objective: the targets' placeholder and the mean squared error.
#include "ops/regression.h"

#include <vector>

#include "ops/elementwise_ops.h"
#include "ops/reduce_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

RegressionObjective regression_objective(graph::Builder& b, graph::ValueRef predictions, std::string_view targets) {
  const graph::TensorType type = b.type(predictions);
  std::vector<int64_t> dims = type.shape.dims;
  if (!dims.empty()) dims[0] = -1;  // any batch
  RegressionObjective objective;
  objective.targets = placeholder(b, targets, type.dtype, graph::Shape(dims));
  auto scope = b.scope("objective");
  objective.loss = reduce_mean(b, square(b, sub(b, predictions, objective.targets)));
  return objective;
}

}  // namespace mirra::ops
