// CUDA kernels of the reductions: ReduceSum/Mean/Max (and SumToShape) with one block per output
// element, its threads striding over the reduced elements and a fixed tree in shared memory, so the
// result never depends on scheduling; ArgMax with one thread per output.
#include <limits>

#include "ops/cuda/launch.cuh"
#include "ops/elementwise_math.h"

namespace mirra::ops::cuda {

namespace {

template <class T, bool kMax>
__device__ T combine(T a, T b) {
  if constexpr (kMax) {
    return math::Maximum::apply<T>(a, b);
  } else {
    return a + b;
  }
}

// Offset in x of the k-th of `count` positions along the dims given (row-major among them).
__device__ int64_t offset_of(int64_t k, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (k % dims[d]) * strides[d];
    k /= dims[d];
  }
  return offset;
}

// What a reduction over nothing gives, as on the CPU (TensorFlow's rules): 0 for sums, -infinity
// (integers: the lowest value) for maxima.
template <class T, bool kMax>
__device__ T identity() {
  if constexpr (!kMax) return T(0);
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}

// With mean_count > 0 the sum is divided by it; a floating mean of nothing is 0 / 0 (NaN), an
// integer one 0, as on the CPU.
template <class T, bool kMax>
__global__ void reduce_kernel(const T* x, T* y, ReduceGeometry g, bool mean) {
  __shared__ T partial[kThreads];
  for (int64_t o = blockIdx.x; o < g.outputs; o += gridDim.x) {
    const T* base = x + offset_of(o, g.kept_rank, g.kept_dims, g.kept_strides);
    T acc = identity<T, kMax>();
    for (int64_t k = threadIdx.x; k < g.reduced; k += blockDim.x) {
      acc = combine<T, kMax>(acc, base[offset_of(k, g.reduced_rank, g.reduced_dims, g.reduced_strides)]);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] = combine<T, kMax>(partial[threadIdx.x], partial[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      T result = partial[0];
      if (mean) result = std::is_integral_v<T> && g.reduced == 0 ? T(0) : result / static_cast<T>(g.reduced);
      y[o] = result;
    }
    __syncthreads();
  }
}

template <class T>
__global__ void argmax_kernel(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = first_index(); o < outer * inner; o += grid_stride()) {
    const T* base = x + (o / inner) * n * inner + o % inner;
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (base[i * inner] > base[best * inner]) best = i;
    }
    y[o] = best;
  }
}

}  // namespace

cudaError_t reduce(ReduceOp op, DType dtype, const void* x, void* y, const ReduceGeometry& geometry, cudaStream_t stream) {
  if (geometry.outputs == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(geometry.outputs, 65535 * 8));
  return visit<float, double, int32_t, int64_t>(dtype, [&]<class T>(T) {
    const auto* px = static_cast<const T*>(x);
    auto* py = static_cast<T*>(y);
    if (op == ReduceOp::max) {
      return launch(reduce_kernel<T, true>, blocks, kThreads, stream, px, py, geometry, false);
    } else {
      return launch(reduce_kernel<T, false>, blocks, kThreads, stream, px, py, geometry, op == ReduceOp::mean);
    }
  });
}

cudaError_t argmax(DType dtype, const void* x, int64_t* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  return visit<float, double, int32_t, int64_t>(dtype, [&]<class T>(T) {
    return launch(argmax_kernel<T>, detail::blocks_for(outer * inner), kThreads, stream, static_cast<const T*>(x), y, outer, n, inner);
  });
}

}  // namespace mirra::ops::cuda
