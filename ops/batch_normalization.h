// batch_normalization: Keras's BatchNormalization layer over FusedBatchNormV3. It makes the layer's
// variables in the builder's current scope, gamma (ones) and beta (zeros), trained, and
// moving_mean (zeros) and moving_variance (ones), not trained, aggregated as means across replicas
// (TensorFlow's ON_READ/MEAN: under a replicating strategy each replica normalises with the
// statistics of its own share of the batch, and the moving statistics become the replicas' mean), and
// the two Assigns a training step runs to move the statistics `1 - momentum` of the way to the batch's.
//
//   auto scope = b.scope("bn1");
//   ops::BatchNormalization bn = ops::batch_normalization(b, conv, {.momentum = 0.9});
//   auto train = ops::minimize(b, loss, optimizer, {.state_updates = bn.state_updates});
#pragma once

#include <string>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

struct BatchNormalizationOptions {
  double momentum = 0.99;  // Keras's defaults
  double epsilon = 1e-3;
  std::string data_format = "NHWC";  // the channel dim: last, or 1 (NCHW, NCDHW)
  bool training = true;              // false: normalise with the moving statistics, which stay as they are
};

struct BatchNormalization {
  graph::ValueRef y;
  graph::ValueRef gamma, beta, moving_mean, moving_variance;
  std::vector<graph::NodeId> state_updates;  // for MinimizeOptions::state_updates; none when not training
};

// x: 4-D or 5-D, f32, f64, or 16-bit (whose statistics and parameters are f32). The channel count
// must be known.
BatchNormalization batch_normalization(graph::Builder& b, graph::ValueRef x, const BatchNormalizationOptions& options = {});

}  // namespace mirra::ops
