// Dynamic loss scaling's two ops (TensorFlow's LossScaleOptimizer, as ops): AllFinite says whether
// every element of its inputs is finite; UpdateLossScale moves the scale after a step. minimize
// builds them when asked for loss scaling (ops/optimizers.h).
#pragma once

#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// A bool scalar: true when no input holds a NaN or an infinity.
graph::ValueRef all_finite(graph::Builder& b, const std::vector<graph::ValueRef>& values);

// Updates the f32 scalar variable `scale` and the i64 scalar variable `good_steps` after a step whose
// gradients were all finite (`finite`) or not: finite, good_steps counts up, and at `growth_steps`
// the scale doubles (unless that overflows) and the count restarts; not finite, the scale halves (not
// below 1) and the count restarts.
graph::NodeId update_loss_scale(graph::Builder& b, graph::ValueRef scale, graph::ValueRef good_steps,
                                graph::ValueRef finite, int64_t growth_steps);

}  // namespace mirra::ops
