// The objective of a classifier: a placeholder for integer labels, the batch's mean softmax
// cross-entropy, and the number of examples whose arg-max logit is the label (what the Trainer
// reports as accuracy). With label smoothing s (TensorFlow's label_smoothing), the cross-entropy is
// against the targets (1 - s) * one_hot + s / classes.
#pragma once

#include <string_view>

#include "graph/builder.h"

namespace mirra::ops {

struct ClassifierObjective {
  graph::ValueRef labels;   // placeholder i64 [?]
  graph::ValueRef loss;     // scalar, the logits' dtype
  graph::ValueRef correct;  // scalar f32
};

struct ObjectiveOptions {
  std::string_view labels = "labels";  // the placeholder's name
  double label_smoothing = 0.0;        // in [0, 1]
};

// logits: [batch, classes], classes known when label_smoothing > 0 (else the builder's status says so).
ClassifierObjective classifier_objective(graph::Builder& b, graph::ValueRef logits, const ObjectiveOptions& options = {});

}  // namespace mirra::ops
