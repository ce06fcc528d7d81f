// classifier_objective: labels, mean cross-entropy and the correct count.
#include "ops/classification.h"

#include <string>

#include "ops/array_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/reduce_ops.h"
#include "ops/softmax_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

ClassifierObjective classifier_objective(graph::Builder& b, graph::ValueRef logits, const ObjectiveOptions& options) {
  ClassifierObjective objective;
  objective.labels = placeholder(b, options.labels, graph::DType::i64, {-1});
  auto scope = b.scope("objective");
  graph::ValueRef losses = sparse_softmax_cross_entropy_with_logits(b, logits, objective.labels).loss;
  if (options.label_smoothing != 0) {
    const double s = options.label_smoothing;
    const graph::TensorType type = b.type(logits);
    if (!(s > 0 && s <= 1)) {
      b.fail(graph::invalid_argument("label smoothing " + std::to_string(s) + " is not in [0, 1]"));
      return objective;
    }
    const int64_t classes = type.shape.rank() == 2 ? type.shape.dim(1) : -1;
    if (classes <= 0) {
      b.fail(graph::invalid_argument("label smoothing needs logits of shape [batch, classes] with the classes known"));
      return objective;
    }
    // Against the targets (1 - s) y + s / K, the loss is the plain cross-entropy plus
    // sum_k (s y_k - s / K) z_k: s times (the label's logit - the mean logit).
    const double spread = s / static_cast<double>(classes);
    const graph::ValueRef weights = one_hot(b, objective.labels, classes, s - spread, -spread, type.dtype);
    losses = add(b, losses, reduce_sum(b, mul(b, weights, logits), Axes{1}));
  }
  objective.loss = reduce_mean(b, losses);
  objective.correct = reduce_sum(b, cast(b, equal(b, argmax(b, logits, 1), objective.labels), graph::DType::f32));
  return objective;
}

}  // namespace mirra::ops
