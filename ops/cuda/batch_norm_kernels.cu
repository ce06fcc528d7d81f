// CUDA kernels of batch normalisation and of its fused forms (a side input and a ReLU after it; the
// gradient through that ReLU): per channel, one block takes the sums the CPU kernel takes (the mean,
// then the squared deviations from it; dy and dy * (x - mean)) in double over a fixed tree in shared
// memory, so the result never depends on scheduling (SyncFusedBatchNorm: takes the whole batch's,
// given), and writes the channel's statistics and the factors of the element-wise pass that follows
// (the CPU's formulas, ops/batch_norm_ops.cc).
#include <cmath>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/sixteen_bit.cuh"

namespace mirra::ops::cuda {

namespace {

// The statistics' and parameters' type of x's T.
template <class T>
using ParamOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
__device__ double wide(T x) {
  return static_cast<double>(accumulated(x));
}

// Flat index of value n of channel c.
__device__ inline int64_t index_of(const BatchNormGeometry& g, int64_t c, int64_t n) {
  return ((n / g.inner) * g.channels + c) * g.inner + n % g.inner;
}

// Per channel (a block each): the statistics outputs, and y = (x - centre) * a + shift's factors.
template <class T>
__global__ void batch_norm_statistics(const T* x, const ParamOf<T>* scale, const ParamOf<T>* offset,
                                      const ParamOf<T>* given_mean, const ParamOf<T>* given_variance,
                                      ParamOf<T>* moving_mean, ParamOf<T>* moving_variance, ParamOf<T>* batch_mean,
                                      ParamOf<T>* batch_variance, ParamOf<T>* factors, const ParamOf<T>* given_batch_mean,
                                      const ParamOf<T>* given_batch_variance, const ParamOf<T>* given_count,
                                      BatchNormGeometry g) {
  using U = ParamOf<T>;
  __shared__ double partial[kThreads];
  const int64_t count = g.outer * g.inner;
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    double mean = 0, variance = 0;
    if (g.training && given_batch_mean != nullptr) {  // SyncFusedBatchNorm: the whole batch's
      mean = static_cast<double>(given_batch_mean[c]);
      variance = static_cast<double>(given_batch_variance[c]);
    } else if (g.training) {
      double sum = 0;
      for (int64_t n = threadIdx.x; n < count; n += blockDim.x) sum += wide(x[index_of(g, c, n)]);
      mean = count > 0 ? block_sum(sum, partial) / static_cast<double>(count) : 0.0;
      double squares = 0;
      for (int64_t n = threadIdx.x; n < count; n += blockDim.x) {
        const double d = wide(x[index_of(g, c, n)]) - mean;
        squares += d * d;
      }
      variance = count > 0 ? block_sum(squares, partial) / static_cast<double>(count) : 0.0;
    } else {
      mean = static_cast<double>(given_mean[c]);
      variance = static_cast<double>(given_variance[c]);
    }
    if (threadIdx.x != 0) continue;
    if (g.training) {
      const double n = given_count != nullptr ? static_cast<double>(*given_count) : static_cast<double>(count);
      const double nan = __longlong_as_double(0x7ff8000000000000LL);
      const double new_mean = n == 0 ? nan : mean;
      const double new_variance = n == 0 ? nan : variance * n / fmax(n - 1.0, 1.0);
      moving_mean[c] = static_cast<U>(g.factor == 1.0 ? new_mean : (1.0 - g.factor) * given_mean[c] + g.factor * new_mean);
      moving_variance[c] = static_cast<U>(g.factor == 1.0 ? new_variance
                                                         : (1.0 - g.factor) * given_variance[c] + g.factor * new_variance);
    } else {
      moving_mean[c] = static_cast<U>(mean);
      moving_variance[c] = static_cast<U>(variance);
    }
    batch_mean[c] = static_cast<U>(mean);
    batch_variance[c] = static_cast<U>(variance);
    const double a = static_cast<double>(scale[c]) / sqrt(variance + g.epsilon);
    const U centre = static_cast<U>(mean);
    factors[c] = centre;
    factors[g.channels + c] = static_cast<U>(a);
    factors[2 * g.channels + c] = static_cast<U>(static_cast<double>(offset[c]) - (mean - static_cast<double>(centre)) * a);
  }
}

// y = (x - centre) * a + shift, plus the side input where given, through the ReLU where asked.
template <class T>
__global__ void batch_norm_apply(const T* x, const ParamOf<T>* factors, const T* side_input, T* y, BatchNormGeometry g) {
  using U = ParamOf<T>;
  const int64_t total = g.outer * g.channels * g.inner;
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const int64_t c = i / g.inner % g.channels;
    const U v = static_cast<U>(accumulated(x[i]));
    U out = (v - factors[c]) * factors[g.channels + c] + factors[2 * g.channels + c];
    if (side_input != nullptr) out += static_cast<U>(accumulated(side_input[i]));
    if (g.relu) out = out > U(0) ? out : U(0);
    y[i] = stored<T>(static_cast<Accumulator<T>>(out));
  }
}

// The gradient that reaches the normalisation at value i: dy, where the activation passes it.
template <class T>
__device__ T reaching(const T* dy, const T* activated, const BatchNormGeometry& g, int64_t i) {
  if (!g.relu || activated == nullptr || accumulated(activated[i]) > 0) return dy[i];
  return stored<T>(Accumulator<T>(0));
}

// Per channel: dscale, doffset, and dx = a * ((dy - mean_dy) - (x - centre) * k)'s factors.
template <class T>
__global__ void batch_norm_grad_statistics(const T* dy, const T* x, const ParamOf<T>* scale, const ParamOf<T>* mean,
                                           const ParamOf<T>* variance, const T* activated, ParamOf<T>* dscale,
                                           ParamOf<T>* doffset, T* masked, ParamOf<T>* factors, BatchNormGeometry g) {
  using U = ParamOf<T>;
  __shared__ double partial[kThreads];
  const int64_t count = g.outer * g.inner;
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    const double centre = static_cast<double>(mean[c]);
    double sum_dy = 0, sum_dy_xc = 0;
    for (int64_t n = threadIdx.x; n < count; n += blockDim.x) {
      const int64_t i = index_of(g, c, n);
      const T reached = reaching(dy, activated, g, i);
      if (masked != nullptr) masked[i] = reached;
      const double d = wide(reached);
      sum_dy += d;
      sum_dy_xc += d * (wide(x[i]) - centre);
    }
    sum_dy = block_sum(sum_dy, partial);
    sum_dy_xc = block_sum(sum_dy_xc, partial);
    if (threadIdx.x != 0) continue;
    const double inv = 1.0 / sqrt(static_cast<double>(variance[c]) + g.epsilon);
    const double n = static_cast<double>(count > 0 ? count : 1);
    dscale[c] = static_cast<U>(sum_dy_xc * inv);
    doffset[c] = static_cast<U>(sum_dy);
    factors[c] = static_cast<U>(centre);
    factors[g.channels + c] = static_cast<U>(static_cast<double>(scale[c]) * inv);
    factors[2 * g.channels + c] = static_cast<U>(g.training ? sum_dy / n : 0.0);
    factors[3 * g.channels + c] = static_cast<U>(g.training ? inv * inv * sum_dy_xc / n : 0.0);
  }
}

template <class T>
__global__ void batch_norm_grad_apply(const T* dy, const T* x, const T* activated, const ParamOf<T>* factors, T* dx,
                                      BatchNormGeometry g) {
  using U = ParamOf<T>;
  const int64_t total = g.outer * g.channels * g.inner, C = g.channels;
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const int64_t c = i / g.inner % C;
    const U d = static_cast<U>(accumulated(reaching(dy, activated, g, i))), v = static_cast<U>(accumulated(x[i]));
    dx[i] = stored<T>(static_cast<Accumulator<T>>(factors[C + c] * ((d - factors[2 * C + c]) - (v - factors[c]) * factors[3 * C + c])));
  }
}

unsigned channel_blocks(int64_t channels) { return static_cast<unsigned>(std::clamp<int64_t>(channels, 1, 65535)); }

}  // namespace

cudaError_t fused_batch_norm(DType dtype, const void* x, const void* scale, const void* offset, const void* mean,
                             const void* variance, void* y, void* moving_mean, void* moving_variance, void* batch_mean,
                             void* batch_variance, void* scratch, const void* given_batch_mean,
                             const void* given_batch_variance, const void* given_count, const void* side_input,
                             const BatchNormGeometry& g, cudaStream_t stream) {
  if (g.channels == 0) return cudaSuccess;
  return visit<float, double, graph::bfloat16, graph::float16>(dtype, [&]<class T>(T) {
    using U = ParamOf<T>;
    auto* factors = static_cast<U*>(scratch);
    cudaError_t e = launch(batch_norm_statistics<T>, channel_blocks(g.channels), kThreads, stream, static_cast<const T*>(x),
                           static_cast<const U*>(scale), static_cast<const U*>(offset), static_cast<const U*>(mean),
                           static_cast<const U*>(variance), static_cast<U*>(moving_mean), static_cast<U*>(moving_variance),
                           static_cast<U*>(batch_mean), static_cast<U*>(batch_variance), factors,
                           static_cast<const U*>(given_batch_mean), static_cast<const U*>(given_batch_variance),
                           static_cast<const U*>(given_count), g);
    const int64_t total = g.outer * g.channels * g.inner;
    if (e == cudaSuccess && total > 0) {
      e = launch(batch_norm_apply<T>, blocks_for(total), kThreads, stream, static_cast<const T*>(x),
                 static_cast<const U*>(factors), static_cast<const T*>(side_input), static_cast<T*>(y), g);
    }
    return e;
  });
}

cudaError_t fused_batch_norm_grad(DType dtype, const void* dy, const void* x, const void* scale, const void* mean,
                                  const void* variance, const void* activated, void* dx, void* dscale, void* doffset,
                                  void* masked, void* scratch, const BatchNormGeometry& g, cudaStream_t stream) {
  if (g.channels == 0) return cudaSuccess;
  return visit<float, double, graph::bfloat16, graph::float16>(dtype, [&]<class T>(T) {
    using U = ParamOf<T>;
    auto* factors = static_cast<U*>(scratch);
    cudaError_t e = launch(batch_norm_grad_statistics<T>, channel_blocks(g.channels), kThreads, stream,
                           static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const U*>(scale),
                           static_cast<const U*>(mean), static_cast<const U*>(variance), static_cast<const T*>(activated),
                           static_cast<U*>(dscale), static_cast<U*>(doffset), static_cast<T*>(masked), factors, g);
    const int64_t total = g.outer * g.channels * g.inner;
    if (e == cudaSuccess && total > 0) {
      e = launch(batch_norm_grad_apply<T>, blocks_for(total), kThreads, stream, static_cast<const T*>(dy),
                 static_cast<const T*>(x), static_cast<const T*>(activated), static_cast<const U*>(factors),
                 static_cast<T*>(dx), g);
    }
    return e;
  });
}

}  // namespace mirra::ops::cuda
