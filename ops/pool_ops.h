// MaxPool and AvgPool: 2-D pooling of an NHWC or NCHW input, SAME or VALID, through oneDNN. The
// average excludes padding, as TensorFlow's does.
#pragma once

#include "graph/builder.h"
#include "ops/nn_options.h"

namespace mirra::ops {

graph::ValueRef max_pool(graph::Builder& b, graph::ValueRef input, const PoolOptions& options = {});
graph::ValueRef avg_pool(graph::Builder& b, graph::ValueRef input, const PoolOptions& options = {});

}  // namespace mirra::ops
