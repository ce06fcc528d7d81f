// Softmax and LogSoftmax along the last axis, and SparseSoftmaxCrossEntropyWithLogits: per-example
// loss of logits [batch, classes] against integer labels [batch], with its gradient as a second output.
#pragma once

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

ValueRef softmax(Builder& b, ValueRef logits);
ValueRef log_softmax(Builder& b, ValueRef logits);

struct SoftmaxCrossEntropy {
  ValueRef loss;      // [batch]
  ValueRef backprop;  // [batch, classes]: d loss / d logits
};
SoftmaxCrossEntropy sparse_softmax_cross_entropy_with_logits(Builder& b, ValueRef logits, ValueRef labels);

}  // namespace mirra::ops
