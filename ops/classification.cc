// classifier_objective: labels, mean cross-entropy and the correct count.
#include "ops/classification.h"

#include "ops/array_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/reduce_ops.h"
#include "ops/softmax_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

ClassifierObjective classifier_objective(graph::Builder& b, graph::ValueRef logits, std::string_view labels) {
  ClassifierObjective objective;
  objective.labels = placeholder(b, labels, graph::DType::i64, {-1});
  auto scope = b.scope("objective");
  objective.loss = reduce_mean(b, sparse_softmax_cross_entropy_with_logits(b, logits, objective.labels).loss);
  objective.correct = reduce_sum(b, cast(b, equal(b, argmax(b, logits, 1), objective.labels), graph::DType::f32));
  return objective;
}

}  // namespace mirra::ops
