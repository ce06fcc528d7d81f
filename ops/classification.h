// The objective of a classifier: a placeholder for integer labels, the batch's mean softmax
// cross-entropy, and the number of examples whose arg-max logit is the label (what the Trainer
// reports as accuracy).
#pragma once

#include <string_view>

#include "graph/builder.h"

namespace mirra::ops {

struct ClassifierObjective {
  graph::ValueRef labels;   // placeholder i64 [?]
  graph::ValueRef loss;     // scalar, the logits' dtype
  graph::ValueRef correct;  // scalar f32
};

ClassifierObjective classifier_objective(graph::Builder& b, graph::ValueRef logits, std::string_view labels = "labels");

}  // namespace mirra::ops
