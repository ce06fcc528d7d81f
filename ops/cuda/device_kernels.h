// The CUDA kernels of the GPU backend, as launch functions over raw device pointers: each enqueues
// its work on `stream` and returns the launch's error (cudaSuccess, or why it did not launch). The
// arithmetic is ops/elementwise_math.h's, shared with the CPU kernels. The host side (shapes,
// dtypes, allocation, errors naming the node) is in the *_kernels.cc files next to this one.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "graph/dtype.h"
#include "ops/attention_geometry.h"

namespace mirra::ops::cuda {

using graph::DType;

inline constexpr int kMaxRank = 8;

enum class UnaryOp : uint8_t { neg, exp, log, sqrt, rsqrt, square, relu, sigmoid, tanh, abs, sign, erf, softplus, gelu, gelu_tanh };
enum class BinaryOp : uint8_t {
  add, sub, mul, div, maximum, minimum, pow,
  equal, not_equal, less, less_equal, greater, greater_equal, logical_and, logical_or
};
// Whether a binary op's output is bool (a comparison or a logical op).
constexpr bool has_bool_output(BinaryOp op) { return op >= BinaryOp::equal; }
constexpr bool is_logical(BinaryOp op) { return op >= BinaryOp::logical_and; }
enum class ReduceOp : uint8_t { sum, mean, max };

// NumPy broadcasting of x and y to the output's dims: each input's strides over them (0 where it is
// broadcast).
struct BroadcastGeometry {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t x_strides[kMaxRank] = {}, y_strides[kMaxRank] = {};
  int64_t elements = 0;
};

// SelectV2: the condition's strides over the output's dims next to the values'.
struct SelectGeometry {
  BroadcastGeometry values;  // x: then_value, y: else_value
  int64_t condition_strides[kMaxRank] = {};
};

// A reduction of x over some of its dims: the output's elements walk the kept dims (x's strides),
// each one sums (or takes the max of) the elements along the reduced dims.
struct ReduceGeometry {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  int64_t reduced_dims[kMaxRank] = {}, reduced_strides[kMaxRank] = {};
  int64_t outputs = 0, reduced = 0;
};

// A box of `dims` elements copied from one tensor to another, each addressed by an element offset
// and its strides over the box's dims (Transpose, Slice, Pad, Concat, Split).
struct BoxCopy {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t from_strides[kMaxRank] = {}, to_strides[kMaxRank] = {};
  int64_t from_offset = 0, to_offset = 0;
  int64_t elements = 0;
};

// f32 and f64 unless said otherwise.
cudaError_t unary(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream);
cudaError_t leaky_relu(DType dtype, double alpha, const void* x, void* y, int64_t n, cudaStream_t stream);
cudaError_t logical_not(const bool* x, bool* y, int64_t n, cudaStream_t stream);
// dx = dy * Gelu'(x), of the exact or the tanh form.
cudaError_t gelu_grad(DType dtype, bool approximate, const void* dy, const void* x, void* dx, int64_t n, cudaStream_t stream);
cudaError_t relu_grad(DType dtype, const void* dy, const void* y, void* dx, int64_t n, cudaStream_t stream);
// f32, f64, i32, i64 (Div and Pow: floats only; the logical ops: bools); comparisons write bools.
cudaError_t binary(BinaryOp op, DType dtype, const void* x, const void* y, void* out, const BroadcastGeometry& geometry,
                   cudaStream_t stream);
// out = condition ? then_value : else_value, broadcast, for elements of 1, 2, 4 or 8 bytes.
cudaError_t select(size_t element_size, const bool* condition, const void* then_value, const void* else_value, void* out,
                   const SelectGeometry& geometry, cudaStream_t stream);
// y[i] = start + i * delta (f32, f64, i32, i64), as the CPU's Range computes it.
cudaError_t range(DType dtype, double start, double delta, void* y, int64_t n, cudaStream_t stream);
// y[i] = x[i] + bias[(i / inner) % channels]: the channel dim is followed by `inner` elements (1 for NHWC).
cudaError_t bias_add(DType dtype, const void* x, const void* bias, void* y, int64_t n, int64_t channels, int64_t inner,
                     cudaStream_t stream);
// Between f32, f64, i32, i64, u8 and bool, with the CPU's saturation rules.
cudaError_t cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream);
// counts[0] += the NaNs of x, counts[1] += its infinities (f32, f64; counts in device memory).
cudaError_t count_non_finite(DType dtype, const void* x, int64_t n, unsigned long long* counts, cudaStream_t stream);
// *finite = whether counts[0] + counts[1] (count_non_finite's) is 0.
cudaError_t none_counted(const unsigned long long* counts, bool* finite, cudaStream_t stream);
// Dynamic loss scaling's step on the device's scalars (the verdict too), as the CPU's UpdateLossScale.
cudaError_t update_loss_scale(float* scale, int64_t* good_steps, const bool* finite, int64_t growth_steps,
                              cudaStream_t stream);
// f32, f64, i32, i64, u8, bool.
cudaError_t fill(DType dtype, double value, void* y, int64_t n, cudaStream_t stream);
// f32, f64, i32, i64 (max: the largest, NaN wins).
cudaError_t reduce(ReduceOp op, DType dtype, const void* x, void* y, const ReduceGeometry& geometry, cudaStream_t stream);
// x viewed as [outer, n, inner]: the index of the first largest of each n (f32, f64, i32, i64).
cudaError_t argmax(DType dtype, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream);
// Per row of [batch, classes] logits: loss = logsumexp - logit[label], backprop = softmax - onehot.
// Labels (i32 or i64) outside [0, classes) give a NaN loss and NaN gradients (the device cannot stop
// the step), as TensorFlow's GPU kernel does.
cudaError_t sparse_softmax_cross_entropy(DType dtype, DType label_dtype, const void* logits, const void* labels,
                                         void* loss, void* backprop, int64_t batch, int64_t classes, cudaStream_t stream);

// Elements of 1, 2, 4 or 8 bytes, whatever their dtype.
cudaError_t copy_box(size_t element_size, const void* from, void* to, const BoxCopy& box, cudaStream_t stream);
// Softmax (or log-softmax) of each row of [rows, classes].
cudaError_t softmax(DType dtype, bool log, const void* x, void* y, int64_t rows, int64_t classes, cudaStream_t stream);
// y[i, c] = on where indices[i] == c, else off (indices i32 or i64; y f32 or f64).
cudaError_t one_hot(DType index_dtype, DType dtype, const void* indices, void* y, int64_t n, int64_t depth, double on,
                    double off, cudaStream_t stream);

// o and each query's log-sum-exp (f32, f64; head sizes d and e up to 256; mask nullptr: none).
cudaError_t attention_forward(DType dtype, const AttentionGeometry& g, const void* q, const void* k, const void* v, const void* mask,
                              void* o, void* lse, cudaStream_t stream);
// dq, dk, dv from dO, the operands and the forward's o and lse; `delta` holds one value per query.
cudaError_t attention_backward(DType dtype, const AttentionGeometry& g, const void* d_out, const void* q, const void* k, const void* v,
                               const void* o, const void* lse, const void* mask, void* delta, void* dq, void* dk, void* dv,
                               cudaStream_t stream);
// Dropout of x's n elements, `per_example` of them per key (f32, f64): y and the mask, as the CPU's.
cudaError_t dropout(DType dtype, const void* x, const int64_t* keys, void* y, void* mask, int64_t n, int64_t per_example,
                    uint64_t seed, double rate, bool training, cudaStream_t stream);
// GatherV2: params seen as [outer, axis_size, inner] elements of `element_size` bytes, y as [outer,
// indices, inner]. An index (i32 or i64) outside [0, axis_size) gives a zero row and adds 1 to *bad.
struct GatherRows {
  int64_t outer = 1, axis_size = 0, inner = 1, indices = 0;
};
cudaError_t gather(size_t element_size, DType index_dtype, const void* params, const void* indices, void* y, const GatherRows& g,
                   unsigned long long* bad, cudaStream_t stream);
// UnsortedSegmentSum's device scratch: `rows` ids and row numbers sorted (sorted_ids, order), the row
// numbers before (rows), segments + 1 starts, and CUB's sort space of segment_sum_scratch_bytes.
struct SegmentScratch {
  void* sorted_ids = nullptr;
  int64_t* rows = nullptr;
  int64_t* order = nullptr;
  int64_t* starts = nullptr;
  void* sort = nullptr;
  size_t sort_bytes = 0;
};
size_t segment_sum_scratch_bytes(DType id_dtype, int64_t rows);
// y [segments, inner] = data [rows, inner]'s rows added by id (i32 or i64) in row order; negative ids
// dropped, each id >= segments adds 1 to *bad (f32, f64, i32, i64).
cudaError_t unsorted_segment_sum(DType dtype, DType id_dtype, const void* data, const void* ids, void* y, int64_t rows,
                                 int64_t inner, int64_t segments, const SegmentScratch& scratch, unsigned long long* bad,
                                 cudaStream_t stream);
// The row-wise updates (SparseApplyGradientDescent, SparseApplyMomentum, SparseApplyAdam): the indices
// sorted with their positions as UnsortedSegmentSum sorts them (`scratch`, of
// segment_sum_scratch_bytes), each index's rows summed in their order and its row of the variable and
// slots updated as ops/elementwise_math.h's update; negative indices dropped, each at or past `limit`
// skipped and counted into *bad. The learning rate, Adam's step and the gate are read on the device.
struct SparseRows {
  const void* rows = nullptr;
  const void* indices = nullptr;
  DType index_dtype = DType::i64;
  int64_t count = 0, width = 1, limit = 0;  // indices, elements per row, the variable's rows
};
enum class SparseRule { gradient_descent, momentum, nesterov_momentum, adam };
struct SparseUpdate {
  SparseRule rule = SparseRule::gradient_descent;
  void* variable = nullptr;
  void* first_slot = nullptr;   // momentum's accumulator, Adam's m
  void* second_slot = nullptr;  // Adam's v
  const void* learning_rate = nullptr;
  const int64_t* step = nullptr;  // Adam's
  const bool* gate = nullptr;
  double momentum = 0, beta1 = 0, beta2 = 0, epsilon = 0;
};
cudaError_t sparse_apply(DType dtype, const SparseUpdate& update, const SparseRows& rows, const SegmentScratch& scratch,
                         unsigned long long* bad, cudaStream_t stream);
// LayerNorm over the rows of x [rows, columns]: y, and each row's mean and rstd (f32, f64).
cudaError_t layer_norm(DType dtype, const void* x, const void* scale, const void* offset, void* y, void* mean, void* rstd,
                       int64_t rows, int64_t columns, double epsilon, cudaStream_t stream);
// LayerNormGrad: dx per row, dscale and doffset per column (the rows added in order).
cudaError_t layer_norm_grad(DType dtype, const void* dy, const void* x, const void* scale, const void* mean, const void* rstd,
                            void* dx, void* dscale, void* doffset, int64_t rows, int64_t columns, cudaStream_t stream);

// 2-D pooling geometry: NHWC or NCHW, the window, its strides and the padding before (the window is
// clipped to the input after).
struct PoolGeometry {
  bool nchw = false;
  int64_t batch = 0, channels = 0, height = 0, width = 0, out_height = 0, out_width = 0;
  int64_t window_h = 0, window_w = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
// Max (the first largest in row-major window order) or average (over the window's real elements)
// pooling, and its gradient gathered per input element in output order (deterministic), f32.
cudaError_t pool_forward(bool max, const float* x, float* y, const PoolGeometry& geometry, cudaStream_t stream);
cudaError_t pool_backward(bool max, const float* x, const float* dy, float* dx, const PoolGeometry& geometry,
                          cudaStream_t stream);

// Optimizer updates in place (f32, f64). Their scalars are read on the device: the learning rate (of
// the variable's dtype), Adam's count of updates done, and the gate (null: none; false: no update),
// so the host never waits for them and a captured step reads each replay's values.
// A weight_decay scales the variable by 1 - learning_rate * weight_decay before the update (SGDW).
cudaError_t apply_gradient_descent(DType dtype, void* variable, const void* gradient, const void* learning_rate,
                                   const bool* gate, double weight_decay, int64_t n, cudaStream_t stream);
// ApplyMomentum's attributes.
struct MomentumParameters {
  double momentum;
  bool nesterov;
  double weight_decay;
};
cudaError_t apply_momentum(DType dtype, void* variable, void* accumulator, const void* gradient, const void* learning_rate,
                           const bool* gate, const MomentumParameters& parameters, int64_t n, cudaStream_t stream);
// ApplyAdam's attributes; the bias corrections come from the step on the device.
struct AdamParameters {
  double beta1, beta2, weight_decay, epsilon;
};
cudaError_t apply_adam(DType dtype, void* variable, void* first_moment, void* second_moment, const void* gradient,
                       const void* learning_rate, const int64_t* step, const bool* gate, const AdamParameters& parameters,
                       int64_t n, cudaStream_t stream);
// variable += delta (f32, f64, i32, i64), unless *gate (when not null) is false.
cudaError_t assign_add(DType dtype, void* variable, const void* delta, const bool* gate, int64_t n, cudaStream_t stream);

// The replicas' buffers of one tensor, all in this GPU's memory: every outputs[r] receives the sum
// (or mean) over r' of inputs[r'], added in replica order as the in-process collective adds, so
// every replica gets the same bits. An output may be its replica's input (f32, f64).
cudaError_t sum_over_replicas(DType dtype, const void* const* inputs, void* const* outputs, int replicas, bool mean,
                              int64_t n, cudaStream_t stream);

// Batch normalisation over x viewed as [outer, channels, inner] (NHWC: inner 1; NCHW: the image), one
// block per channel summing in double over a fixed tree. x is f32, f64, bf16 or f16; the statistics
// and parameters are U: f64 for f64 x, else f32.
struct BatchNormGeometry {
  int64_t outer = 0, channels = 0, inner = 0;
  double epsilon = 0, factor = 1;  // factor: exponential_avg_factor
  bool training = true;
  bool relu = false;  // FusedBatchNormEx's and SyncFusedBatchNorm's activation; FusedBatchNormGradEx's
};
// FusedBatchNormV3: y, and the statistics outputs (moving mean and variance, batch mean and biased
// variance), from scale, offset and the given mean and variance (read when not training or factor != 1);
// `scratch` holds 3 * channels U. SyncFusedBatchNorm passes the whole batch's mean and biased
// variance and their count (a U scalar) to train with; FusedBatchNormV3 nullptr for each. The
// normalised value then takes `side_input` (x's shape; nullptr: none) and geometry.relu.
cudaError_t fused_batch_norm(DType dtype, const void* x, const void* scale, const void* offset, const void* mean,
                             const void* variance, void* y, void* moving_mean, void* moving_variance, void* batch_mean,
                             void* batch_variance, void* scratch, const void* given_batch_mean,
                             const void* given_batch_variance, const void* given_count, const void* side_input,
                             const BatchNormGeometry& geometry, cudaStream_t stream);
// FusedBatchNormGradV3: dx, dscale and doffset from dy, x, scale and the reserve spaces' mean and
// variance; `scratch` holds 4 * channels U. FusedBatchNormGradEx passes `activated`, the
// activation's output: with geometry.relu dy passes where it is > 0, and `masked` (x's shape;
// nullptr: not written) receives what passed.
cudaError_t fused_batch_norm_grad(DType dtype, const void* dy, const void* x, const void* scale, const void* mean,
                                  const void* variance, const void* activated, void* dx, void* dscale, void* doffset,
                                  void* masked, void* scratch, const BatchNormGeometry& geometry, cudaStream_t stream);

}  // namespace mirra::ops::cuda
