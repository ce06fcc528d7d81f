// Every built-in op's builder, and the op and kernel tables: include this to build graphs.
//
//   graph::Graph g;
//   graph::Builder b(g, ops::registry(), /*seed=*/1);
//   auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 784});
//   auto w = ops::variable(b, "w", {784, 10}, ops::Initializer::glorot_uniform());
//   auto y = ops::softmax(b, ops::matmul(b, x, w));
#pragma once

#include "ops/array_ops.h"
#include "ops/attention_ops.h"
#include "ops/batch_norm_ops.h"
#include "ops/batch_normalization.h"
#include "ops/check_numerics_ops.h"
#include "ops/classification.h"
#include "ops/conv_ops.h"
#include "ops/distribute_ops.h"
#include "ops/dropout_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/fusion.h"
#include "ops/gather_ops.h"
#include "ops/inference_mode.h"
#include "ops/layer_norm_ops.h"
#include "ops/loss_scale_ops.h"
#include "ops/matmul_ops.h"
#include "ops/mixed_precision.h"
#include "ops/optimizer_ops.h"
#include "ops/optimizers.h"
#include "ops/sparse_optimizer_ops.h"
#include "ops/sparse_updates.h"
#include "ops/collective_ops.h"
#include "ops/pool_ops.h"
#include "ops/recomputation.h"
#include "ops/reduce_ops.h"
#include "ops/regression.h"
#include "ops/registry.h"
#include "ops/regularizers.h"
#include "ops/sixteen_bit_activations.h"
#include "ops/softmax_ops.h"
#include "ops/task_partition.h"
#include "ops/source_ops.h"
#include "ops/training_passes.h"
