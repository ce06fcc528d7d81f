// batch_normalization: the layer's variables, its FusedBatchNormV3 and its moving statistics' updates.
#include "ops/batch_normalization.h"

#include "ops/batch_norm_ops.h"
#include "ops/optimizer_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

BatchNormalization batch_normalization(graph::Builder& b, graph::ValueRef x, const BatchNormalizationOptions& options) {
  BatchNormalization layer;
  if (!x.valid() || !b.status().ok()) return layer;
  const graph::TensorType type = b.type(x);
  const int rank = type.shape.rank();
  const bool channels_first = options.data_format == "NCHW" || options.data_format == "NCDHW";
  const int64_t channels = rank == 0 ? -1 : type.shape.dim(channels_first ? 1 : rank - 1);
  if (channels < 0) {
    b.fail(graph::invalid_argument("batch_normalization of " + type.to_string() + " in " + options.data_format +
                                   ": the channel count must be known"));
    return layer;
  }
  if (options.momentum < 0 || options.momentum > 1) {
    b.fail(graph::invalid_argument("batch_normalization: momentum must be in [0, 1]"));
    return layer;
  }
  const graph::DType statistics = type.dtype == graph::DType::f64 ? graph::DType::f64 : graph::DType::f32;
  layer.gamma = variable(b, "gamma", {channels}, Initializer::ones(), statistics);
  layer.beta = variable(b, "beta", {channels}, Initializer::zeros(), statistics);
  // Each replica keeps its own moving averages; they are averaged when read (TensorFlow's ON_READ).
  layer.moving_mean = variable(b, "moving_mean", {channels}, Initializer::zeros(), statistics, false,
                               VariableAggregation::mean, VariableSynchronization::on_read);
  layer.moving_variance = variable(b, "moving_variance", {channels}, Initializer::ones(), statistics, false,
                                   VariableAggregation::mean, VariableSynchronization::on_read);
  const BatchNorm bn = fused_batch_norm(b, x, layer.gamma, layer.beta, layer.moving_mean, layer.moving_variance,
                                        {.epsilon = options.epsilon,
                                         .exponential_avg_factor = 1.0 - options.momentum,
                                         .data_format = options.data_format,
                                         .is_training = options.training});
  layer.y = bn.y;
  if (options.training && bn.y.valid()) {
    layer.state_updates = {assign(b, layer.moving_mean, bn.batch_mean), assign(b, layer.moving_variance, bn.batch_variance)};
  }
  return layer;
}

}  // namespace mirra::ops
