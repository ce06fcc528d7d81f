// The objective of a regression: a placeholder for the targets (the predictions' dtype and shape), and
// the batch's mean squared error, over the examples and the outputs (Keras's MeanSquaredError averaged
// over the batch). It counts no correct predictions: the Trainer reports the loss and no accuracy.
//
//   const ops::RegressionObjective objective = ops::regression_objective(b, ops::matmul(b, x, w));
#pragma once

#include <string_view>

#include "graph/builder.h"

namespace mirra::ops {

struct RegressionObjective {
  graph::ValueRef targets;  // placeholder [?, outputs...]
  graph::ValueRef loss;     // scalar
};

// predictions: [batch, outputs...].
RegressionObjective regression_objective(graph::Builder& b, graph::ValueRef predictions, std::string_view targets = "targets");

}  // namespace mirra::ops
