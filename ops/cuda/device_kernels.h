// The CUDA kernels of the GPU backend, as launch functions over raw device pointers: each enqueues
// its work on `stream` and returns the launch's error (cudaSuccess, or why it did not launch). The
// arithmetic is ops/elementwise_math.h's, shared with the CPU kernels. The host side (shapes,
// dtypes, allocation, errors naming the node) is in the *_kernels.cc files next to this one.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "graph/dtype.h"

namespace mirra::ops::cuda {

using graph::DType;

inline constexpr int kMaxRank = 8;

enum class UnaryOp : uint8_t { neg, exp, log, sqrt, rsqrt, square, relu, sigmoid, tanh };
enum class BinaryOp : uint8_t { add, sub, mul, div, maximum, equal };
enum class ReduceOp : uint8_t { sum, mean, max };

// NumPy broadcasting of x and y to the output's dims: each input's strides over them (0 where it is
// broadcast).
struct BroadcastGeometry {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t x_strides[kMaxRank] = {}, y_strides[kMaxRank] = {};
  int64_t elements = 0;
};

// A reduction of x over some of its dims: the output's elements walk the kept dims (x's strides),
// each one sums (or takes the max of) the elements along the reduced dims.
struct ReduceGeometry {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  int64_t reduced_dims[kMaxRank] = {}, reduced_strides[kMaxRank] = {};
  int64_t outputs = 0, reduced = 0;
};

// f32 and f64 unless said otherwise.
cudaError_t unary(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, cudaStream_t stream);
cudaError_t relu_grad(DType dtype, const void* dy, const void* y, void* dx, int64_t n, cudaStream_t stream);
// f32, f64, i32, i64 (Div: floats only); Equal writes bools.
cudaError_t binary(BinaryOp op, DType dtype, const void* x, const void* y, void* out, const BroadcastGeometry& geometry,
                   cudaStream_t stream);
// y[i] = x[i] + bias[(i / inner) % channels]: the channel dim is followed by `inner` elements (1 for NHWC).
cudaError_t bias_add(DType dtype, const void* x, const void* bias, void* y, int64_t n, int64_t channels, int64_t inner,
                     cudaStream_t stream);
// Between f32, f64, i32, i64, u8 and bool, with the CPU's saturation rules.
cudaError_t cast(DType from, DType to, const void* x, void* y, int64_t n, cudaStream_t stream);
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

// Optimizer updates in place (f32, f64); learning rates are host values.
cudaError_t apply_gradient_descent(DType dtype, void* variable, const void* gradient, double learning_rate, int64_t n,
                                   cudaStream_t stream);
cudaError_t apply_momentum(DType dtype, void* variable, void* accumulator, const void* gradient, double learning_rate,
                           double momentum, bool nesterov, int64_t n, cudaStream_t stream);
// The AdamUpdate's fields (ops/elementwise_math.h), as doubles.
struct AdamParameters {
  double beta1, beta2, step_size, inverse_sqrt_correction2, decay, epsilon;
};
cudaError_t apply_adam(DType dtype, void* variable, void* first_moment, void* second_moment, const void* gradient,
                       const AdamParameters& parameters, int64_t n, cudaStream_t stream);
// variable += delta (f32, f64, i32, i64).
cudaError_t assign_add(DType dtype, void* variable, const void* delta, int64_t n, cudaStream_t stream);

}  // namespace mirra::ops::cuda
