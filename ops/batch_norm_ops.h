// FusedBatchNormV3 and FusedBatchNormGradV3, TensorFlow's batch normalisation ops: per-channel
// statistics over every dim but the channel dim of a 4-D (NHWC, NCHW) or 5-D (NDHWC, NCDHW) input.
//
// In training (is_training) the batch's mean and biased variance normalise x: y = (x - mean) /
// sqrt(variance + epsilon) * scale + offset. Outputs 1 and 2 are then what the moving statistics
// become, exponential_avg_factor f of the way from the given mean and variance to the batch's (f = 1:
// the batch's own), the variance corrected by n / (n - 1) for the n values a channel has, as
// TensorFlow returns it; reserve_space_1 and _2 hold the batch mean and biased variance for the
// gradient. In inference the given mean and variance normalise, and outputs 1 to 4 are them.
//
// x is f32, bf16 or f16 (mixed precision's activations) with f32 statistics and parameters, as in
// TensorFlow, or f64 with f64 ones (TensorFlow refuses f64; mirra computes it, for gradient checks and
// float64 references). The sums run over blocks fixed by the shape, so results do not depend on the
// thread count.
//
//   BatchNorm bn = fused_batch_norm(b, x, gamma, beta, moving_mean, moving_variance,
//                                   {.epsilon = 1e-3, .exponential_avg_factor = 0.01});
//   // bn.y normalised; assign bn.batch_mean and bn.batch_variance to the moving statistics
#pragma once

#include <string>

#include "graph/builder.h"

namespace mirra::ops {

struct BatchNormOptions {
  double epsilon = 1e-4;  // TensorFlow's default
  double exponential_avg_factor = 1.0;
  std::string data_format = "NHWC";  // NHWC or NCHW (4-D), NDHWC or NCDHW (5-D)
  bool is_training = true;
};

struct BatchNorm {
  graph::ValueRef y;
  graph::ValueRef batch_mean, batch_variance;                         // the moving statistics' new values
  graph::ValueRef reserve_space_1, reserve_space_2, reserve_space_3;  // for FusedBatchNormGradV3
};

// `mean` and `variance` may be empty ([0]) in training with an exponential_avg_factor of 1.
BatchNorm fused_batch_norm(graph::Builder& b, graph::ValueRef x, graph::ValueRef scale, graph::ValueRef offset,
                           graph::ValueRef mean, graph::ValueRef variance, const BatchNormOptions& options = {});

// What FusedBatchNormEx and SyncFusedBatchNorm (mirra's) do with the normalised value before they
// store it: add `side_input` (x's dtype and shape; invalid: none), then apply `activation` (relu or
// none). FusedBatchNormEx is what ops::fuse_batch_norm_activation makes of a FusedBatchNormV3 read
// only by a ReLU, or by an Add of another value of its shape that a ReLU reads (a residual block's
// sum); FusedBatchNormGradEx is then its gradient.
struct BatchNormEpilogue {
  graph::ValueRef side_input;
  std::string activation = "none";
};

// SyncFusedBatchNorm (mirra's): FusedBatchNormV3 whose training statistics are given, the mean and
// biased variance of the whole batch over every replica, taken over `count` (a scalar of the
// statistics' dtype) values per channel; the moving statistics move towards them, the variance
// corrected by count / (count - 1). In inference it is FusedBatchNormV3. The sync_batch_norm rewrite
// (strategies/batch_norm_sync.h) makes it; it has no gradient rule of its own.
BatchNorm sync_fused_batch_norm(graph::Builder& b, graph::ValueRef x, graph::ValueRef scale, graph::ValueRef offset,
                                graph::ValueRef mean, graph::ValueRef variance, graph::ValueRef batch_mean,
                                graph::ValueRef batch_variance, graph::ValueRef count, const BatchNormOptions& options = {},
                                const BatchNormEpilogue& epilogue = {});

struct BatchNormGrad {
  graph::ValueRef x, scale, offset;
};

// The gradient of fused_batch_norm's y with respect to x, scale and offset, from `dy` and the
// reserve spaces it returned (in inference: its mean and variance). options.exponential_avg_factor
// is not read.
BatchNormGrad fused_batch_norm_grad(graph::Builder& b, graph::ValueRef dy, graph::ValueRef x, graph::ValueRef scale,
                                    graph::ValueRef reserve_space_1, graph::ValueRef reserve_space_2,
                                    graph::ValueRef reserve_space_3, const BatchNormOptions& options = {});

}  // namespace mirra::ops
