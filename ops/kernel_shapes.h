// What the CPU and GPU kernels of an op agree on before any arithmetic: the checks of run-time shapes
// (with the error that names the problem) and the shapes and geometry of their outputs. Each
// function serves every device's kernel of its op, so the devices cannot drift apart.
#pragma once

#include <vector>

#include "graph/status.h"
#include "ops/attention_geometry.h"
#include "runtime/kernel.h"

namespace mirra::ops {

using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

// Concat: the output shape along the node's axis; inputs must agree off it.
graph::Expected<TensorShape> concat_shape(const KernelContext& ctx, int axis);
// Split: one part's shape; the dim must split into equal parts.
graph::Expected<TensorShape> split_part_shape(const Tensor& x, int axis, int64_t parts);
// Slice: the box the node's begin and size attributes cut from x (size -1: to the end).
graph::Expected<TensorShape> slice_box(const KernelContext& ctx, const Tensor& x);
// Pad: the padded shape, with the origin of x in it written to `origin` (x.rank() entries).
TensorShape padded_shape(const KernelContext& ctx, const Tensor& x, int64_t* origin);

// SelectV2: the shape its condition, then and else values broadcast to together.
graph::Expected<TensorShape> select_shape(const Tensor& condition, const Tensor& then_value, const Tensor& else_value);
// Tile: the output's shape, each dim of x times the node's multiple of it.
graph::Expected<TensorShape> tile_shape(const KernelContext& ctx, const TensorShape& x);
// ExpandDims and Squeeze: x's shape with a 1 inserted at the node's axis, or with the node's size-1
// axes (all of them, when it names none) removed.
graph::Expected<TensorShape> expand_dims_shape(const KernelContext& ctx, const TensorShape& x);
graph::Expected<TensorShape> squeeze_shape(const KernelContext& ctx, const TensorShape& x);
// Range: how many elements start, start + delta, ... has before limit, counted in the arithmetic of
// dtype as TensorFlow counts them; the bounds checked (integral and in range for an integer dtype,
// delta not 0 and pointing from start towards limit).
graph::Expected<int64_t> range_size(graph::DType dtype, double start, double limit, double delta);

// SumToShape: the dims of x summed to give like's shape (the dims `like` was broadcast along).
graph::Expected<std::vector<int>> sum_to_shape_axes(const Tensor& x, const Tensor& like);

// ArgMax over the node's axis of x, seen as [outer, n, inner], and its output shape.
struct ArgMaxGeometry {
  int64_t outer = 1, n = 0, inner = 1;
  TensorShape output;
};
graph::Expected<ArgMaxGeometry> argmax_geometry(const KernelContext& ctx, const Tensor& x);

// BiasAdd: the channel count and the elements after the channel dim (1 for NHWC).
struct BiasGeometry {
  int64_t channels = 0, inner = 1;
};
graph::Expected<BiasGeometry> bias_geometry(const KernelContext& ctx, const Tensor& x, const Tensor& bias);

// GatherV2: params seen as [outer, axis_size, inner], `indices` indices, the output's shape.
struct GatherGeometry {
  int64_t outer = 1, axis_size = 0, inner = 1, indices = 0;
  TensorShape output;
};
GatherGeometry gather_geometry(const TensorShape& params, const TensorShape& indices, int64_t axis);
// UnsortedSegmentSum: data seen as [rows, inner] (rows: one per segment id), the output's shape.
struct SegmentGeometry {
  int64_t rows = 0, inner = 1;
  TensorShape output;
};
graph::Expected<SegmentGeometry> segment_geometry(const TensorShape& data, const TensorShape& ids, int64_t segments);

// BatchMatMulV2: each output matrix's operand matrices (indices into x's and y's matrices after the
// batch dims broadcast), the sizes of op(x) [m, k] and op(y) [k, n], the output's shape.
struct BatchMatMulGeometry {
  bool adj_x = false, adj_y = false;
  int64_t m = 0, k = 0, n = 0, batch = 1;
  std::vector<int64_t> x_batch, y_batch;
  TensorShape output;
};
graph::Expected<BatchMatMulGeometry> batch_matmul_geometry(const KernelContext& ctx);

// ScaledDotProductAttention (q, k, v at inputs first .. first + 2, the mask at input `mask`, when the
// node has it): its geometry, checked.
graph::Expected<AttentionGeometry> attention_geometry(const KernelContext& ctx, size_t first, size_t mask);

// LayerNorm (inputs x, scale, offset) and LayerNormGrad (dy, x, scale, mean, rstd): x seen as [rows,
// columns], its row statistics' shape, the operands checked against it.
struct LayerNormGeometry {
  int64_t rows = 1, columns = 0;
  TensorShape row_shape;
};
graph::Expected<LayerNormGeometry> layer_norm_geometry(const KernelContext& ctx, bool gradient);

// Dropout: the elements of x per example of `keys` (x's dim 0 holds their rows, equally many each).
graph::Expected<int64_t> dropout_elements_per_example(const Tensor& x, const Tensor& keys);

// Conv2D and FusedConv2D: the filter matches the input's channels (in NCHW or NHWC); a bias (may be
// null) its outputs, and the node's input 2 is f32 or `output`, the node's output dtype.
graph::Status check_conv_operands(const KernelContext& ctx, const Tensor& input, const Tensor& filter, const Tensor* bias,
                                  bool nchw, graph::DType output);

// SparseSoftmaxCrossEntropyWithLogits: one label per row of the logits.
graph::Status check_labels(const Tensor& logits, const Tensor& labels);

// Optimizer updates: operands 1..last have the variable's (input 0's) shape.
graph::Status check_update_operands(const KernelContext& ctx, size_t last);
// Assign: inputs 1.. have the variable's dtype and, together, its element count.
graph::Status check_assigned_parts(const KernelContext& ctx);
// Optimizer updates: true when the optional gate (input `gate`, a host-memory bool scalar; loss
// scaling's "every gradient is finite") is there and false, so the update must change nothing.
bool update_gated_off(const KernelContext& ctx, size_t gate);
// Where each update op's gate is.
inline constexpr size_t kGradientDescentGate = 3, kMomentumGate = 4, kAdamGate = 6, kAssignAddGate = 2;
// Row-wise updates (ops/sparse_optimizer_ops.h): the `slots` inputs after the variable have its shape,
// and the rows (input slots + 1) the indices' (input slots + 2) shape followed by the variable's row.
graph::Status check_sparse_update_operands(const KernelContext& ctx, size_t slots);
inline constexpr size_t kSparseGradientDescentGate = 4, kSparseMomentumGate = 5, kSparseAdamGate = 7;

}  // namespace mirra::ops
