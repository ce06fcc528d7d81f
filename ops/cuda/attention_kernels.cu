// CUDA kernels of ScaledDotProductAttention and its gradient: a block per query row (forward, dQ) or
// key row (dK, dV) streams the other side in chunks of a block's width, each thread scoring one pair
// into shared memory, and the threads along the head size add a chunk's contributions in order, so no
// [T, S] matrix is held and every sum has one fixed order. The probabilities come from each row's
// log-sum-exp, found in a first sweep (forward) or saved by it (backward). Not yet tiled for the
// tensor cores.
#include <cmath>

#include "ops/cuda/launch.cuh"

namespace mirra::ops::cuda {

namespace {

// The score of query i and key j of head bh: scaled, masked, -inf where causality forbids.
template <class T>
__device__ T score(const AttentionGeometry& g, const T* q, const T* k, const T* mask, int64_t bh, int64_t i, int64_t j) {
  if (g.causal && j > i) return -INFINITY;
  T dot = 0;
  for (int64_t x = 0; x < g.d; ++x) dot += q[(bh * g.t + i) * g.d + x] * k[(bh * g.s + j) * g.d + x];
  T value = dot * static_cast<T>(g.scale);
  if (mask != nullptr) {
    const int64_t b = bh / g.heads, h = bh % g.heads;
    value += mask[b * g.mask_strides[0] + h * g.mask_strides[1] + i * g.mask_strides[2] + j * g.mask_strides[3]];
  }
  return value;
}

template <class T>
__device__ T block_max(T mine, double* partial) {
  partial[threadIdx.x] = static_cast<double>(mine);
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] = fmax(partial[threadIdx.x], partial[threadIdx.x + width]);
    __syncthreads();
  }
  const T top = static_cast<T>(partial[0]);
  __syncthreads();
  return top;
}

template <class T>
__global__ void attention_forward_kernel(AttentionGeometry g, const T* q, const T* k, const T* v, const T* mask, T* o, T* lse) {
  __shared__ double partial[kThreads];
  __shared__ T p[kThreads];
  for (int64_t row = blockIdx.x; row < g.batch * g.heads * g.t; row += gridDim.x) {
    const int64_t bh = row / g.t, i = row % g.t;
    T top = -INFINITY;
    for (int64_t j = threadIdx.x; j < g.s; j += blockDim.x) top = fmax(top, score(g, q, k, mask, bh, i, j));
    top = block_max(top, partial);
    double sum = 0;
    if (top != -INFINITY) {
      for (int64_t j = threadIdx.x; j < g.s; j += blockDim.x) sum += exp(static_cast<double>(score(g, q, k, mask, bh, i, j) - top));
    }
    sum = block_sum(sum, partial);
    const T row_lse = sum > 0 ? top + static_cast<T>(log(sum)) : -INFINITY;
    T acc = 0;  // output element threadIdx.x, when it is one
    for (int64_t chunk = 0; chunk < g.s; chunk += blockDim.x) {
      const int64_t j = chunk + threadIdx.x;
      p[threadIdx.x] = j < g.s && sum > 0 ? exp(score(g, q, k, mask, bh, i, j) - row_lse) : T(0);
      __syncthreads();
      if (threadIdx.x < g.e) {
        for (int64_t c = 0; c < blockDim.x && chunk + c < g.s; ++c) acc += p[c] * v[(bh * g.s + chunk + c) * g.e + threadIdx.x];
      }
      __syncthreads();
    }
    if (threadIdx.x < g.e) o[row * g.e + threadIdx.x] = acc;
    if (threadIdx.x == 0) lse[row] = row_lse;
  }
}

// delta[row] = sum over e of dO o.
template <class T>
__global__ void attention_delta_kernel(const T* d_out, const T* o, T* delta, int64_t rows, int64_t e) {
  for (int64_t row = first_index(); row < rows; row += grid_stride()) {
    T sum = 0;
    for (int64_t x = 0; x < e; ++x) sum += d_out[row * e + x] * o[row * e + x];
    delta[row] = sum;
  }
}

// dS of query i and key j: P (dO_i . v_j - delta_i).
template <class T>
__device__ void probability_and_ds(const AttentionGeometry& g, const T* q, const T* k, const T* v, const T* mask, const T* d_out,
                                   const T* lse, const T* delta, int64_t bh, int64_t i, int64_t j, T& p, T& ds) {
  const T row_lse = lse[bh * g.t + i];
  p = row_lse == -INFINITY ? T(0) : exp(score(g, q, k, mask, bh, i, j) - row_lse);
  T dp = 0;
  for (int64_t x = 0; x < g.e; ++x) dp += d_out[(bh * g.t + i) * g.e + x] * v[(bh * g.s + j) * g.e + x];
  ds = p * (dp - delta[bh * g.t + i]);
}

template <class T>
__global__ void attention_dq_kernel(AttentionGeometry g, const T* q, const T* k, const T* v, const T* mask, const T* d_out, const T* lse,
                                    const T* delta, T* dq) {
  __shared__ T ds_chunk[kThreads];
  for (int64_t row = blockIdx.x; row < g.batch * g.heads * g.t; row += gridDim.x) {
    const int64_t bh = row / g.t, i = row % g.t;
    T acc = 0;
    for (int64_t chunk = 0; chunk < g.s; chunk += blockDim.x) {
      const int64_t j = chunk + threadIdx.x;
      T p = 0, ds = 0;
      if (j < g.s) probability_and_ds(g, q, k, v, mask, d_out, lse, delta, bh, i, j, p, ds);
      ds_chunk[threadIdx.x] = ds;
      __syncthreads();
      if (threadIdx.x < g.d) {
        for (int64_t c = 0; c < blockDim.x && chunk + c < g.s; ++c) acc += ds_chunk[c] * k[(bh * g.s + chunk + c) * g.d + threadIdx.x];
      }
      __syncthreads();
    }
    if (threadIdx.x < g.d) dq[row * g.d + threadIdx.x] = acc * static_cast<T>(g.scale);
  }
}

template <class T>
__global__ void attention_dkv_kernel(AttentionGeometry g, const T* q, const T* k, const T* v, const T* mask, const T* d_out, const T* lse,
                                     const T* delta, T* dk, T* dv) {
  __shared__ T p_chunk[kThreads];
  __shared__ T ds_chunk[kThreads];
  for (int64_t row = blockIdx.x; row < g.batch * g.heads * g.s; row += gridDim.x) {
    const int64_t bh = row / g.s, j = row % g.s;
    T dk_acc = 0, dv_acc = 0;
    for (int64_t chunk = 0; chunk < g.t; chunk += blockDim.x) {
      const int64_t i = chunk + threadIdx.x;
      T p = 0, ds = 0;
      if (i < g.t) probability_and_ds(g, q, k, v, mask, d_out, lse, delta, bh, i, j, p, ds);
      p_chunk[threadIdx.x] = p;
      ds_chunk[threadIdx.x] = ds;
      __syncthreads();
      for (int64_t c = 0; c < blockDim.x && chunk + c < g.t; ++c) {
        const int64_t query = bh * g.t + chunk + c;
        if (threadIdx.x < g.d) dk_acc += ds_chunk[c] * q[query * g.d + threadIdx.x];
        if (threadIdx.x < g.e) dv_acc += p_chunk[c] * d_out[query * g.e + threadIdx.x];
      }
      __syncthreads();
    }
    if (threadIdx.x < g.d) dk[row * g.d + threadIdx.x] = dk_acc * static_cast<T>(g.scale);
    if (threadIdx.x < g.e) dv[row * g.e + threadIdx.x] = dv_acc;
  }
}

unsigned rows_grid(int64_t rows) { return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, 65535)); }

}  // namespace

cudaError_t attention_forward(DType dtype, const AttentionGeometry& g, const void* q, const void* k, const void* v, const void* mask,
                              void* o, void* lse, cudaStream_t stream) {
  if (g.batch * g.heads * g.t == 0) return cudaSuccess;
  if (g.d > kThreads || g.e > kThreads) return cudaErrorNotSupported;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(attention_forward_kernel<T>, rows_grid(g.batch * g.heads * g.t), kThreads, stream, g, static_cast<const T*>(q),
                  static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(mask), static_cast<T*>(o),
                  static_cast<T*>(lse));
  });
}

cudaError_t attention_backward(DType dtype, const AttentionGeometry& g, const void* d_out, const void* q, const void* k, const void* v,
                               const void* o, const void* lse, const void* mask, void* delta, void* dq, void* dk, void* dv,
                               cudaStream_t stream) {
  if (g.d > kThreads || g.e > kThreads) return cudaErrorNotSupported;
  return visit<float, double>(dtype, [&]<class T>(T) {
    const int64_t queries = g.batch * g.heads * g.t, keys = g.batch * g.heads * g.s;
    const auto* typed_mask = static_cast<const T*>(mask);
    cudaError_t result = cudaSuccess;
    if (queries > 0) {
      result = launch(attention_delta_kernel<T>, blocks_for(queries), kThreads, stream, static_cast<const T*>(d_out),
                      static_cast<const T*>(o), static_cast<T*>(delta), queries, g.e);
      if (result == cudaSuccess) {
        result = launch(attention_dq_kernel<T>, rows_grid(queries), kThreads, stream, g, static_cast<const T*>(q),
                        static_cast<const T*>(k), static_cast<const T*>(v), typed_mask, static_cast<const T*>(d_out),
                        static_cast<const T*>(lse), static_cast<const T*>(delta), static_cast<T*>(dq));
      }
    }
    if (result == cudaSuccess && keys > 0) {
      result = launch(attention_dkv_kernel<T>, rows_grid(keys), kThreads, stream, g, static_cast<const T*>(q), static_cast<const T*>(k),
                      static_cast<const T*>(v), typed_mask, static_cast<const T*>(d_out), static_cast<const T*>(lse),
                      static_cast<const T*>(delta), static_cast<T*>(dk), static_cast<T*>(dv));
    }
    return result;
  });
}

}  // namespace mirra::ops::cuda
