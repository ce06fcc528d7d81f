// Layer normalisation (mirra's own fused op; Keras's LayerNormalization and PyTorch's layer_norm over
// the last axis): each row of x normalised by its own mean and biased variance, then scaled and
// offset per column. LayerNorm also returns each row's mean and reciprocal standard deviation, which
// its gradient, LayerNormGrad, reads instead of recomputing them.
#pragma once

#include <string_view>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

// y = (x - mean) / sqrt(variance + epsilon) * scale + offset over x's last dim (scale and offset
// [x.dim(-1)]). 1e-5 is PyTorch's default epsilon (Keras's is 1e-3).
ValueRef layer_norm(Builder& b, ValueRef x, ValueRef scale, ValueRef offset, double epsilon = 1e-5);
// The layer: variables `gamma` (ones) and `beta` (zeros) of x's last dim in scope `name`.
ValueRef layer_normalization(Builder& b, std::string_view name, ValueRef x, double epsilon = 1e-5);

}  // namespace mirra::ops
