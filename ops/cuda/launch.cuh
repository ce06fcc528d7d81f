// What the CUDA kernel files share: grid-stride loops over int64 element counts, a launch shape for
// n elements, a block's deterministic sum, the launch itself, and the dispatch from a run-time dtype to the element type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

#include "ops/cuda/device_kernels.h"

namespace mirra::ops::cuda::detail {

inline constexpr int kThreads = 256;

// Enough blocks to cover n (capped; grid-stride loops do the rest), at least one.
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535 * 8));
}

__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Launches kernel<<<blocks, threads, 0, stream>>>(args...) and returns that launch's own error (a bad
// configuration) or none. The error state is cleared first: an earlier call's error that its caller
// ignored is not taken for this launch's.
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), unsigned blocks, unsigned threads, cudaStream_t stream, Args&&... args) {
  (void)cudaGetLastError();
  kernel<<<blocks, threads, 0, stream>>>(static_cast<Params>(std::forward<Args>(args))...);
  return cudaGetLastError();
}

// The sum of `mine` over a block of kThreads threads (one value each), on every thread: a fixed tree
// in `partial` (kThreads doubles of shared memory), so the bits never depend on scheduling.
__device__ inline double block_sum(double mine, double* partial) {
  partial[threadIdx.x] = mine;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  const double sum = partial[0];
  __syncthreads();
  return sum;
}

// Calls f(T{}) with the element type of `dtype` among Ts; cudaErrorNotSupported for another.
template <class... Ts, class F>
cudaError_t visit(DType dtype, F&& f) {
  cudaError_t result = cudaErrorNotSupported;
  ((graph::dtype_of<Ts>() == dtype ? (result = f(Ts{}), true) : false) || ...);
  return result;
}

}  // namespace mirra::ops::cuda::detail

namespace mirra::ops::cuda {
// Every kernel file launches with these.
using detail::block_sum;
using detail::blocks_for;
using detail::first_index;
using detail::grid_stride;
using detail::kThreads;
using detail::launch;
using detail::visit;
}  // namespace mirra::ops::cuda
