// CUDA kernels of the array ops: box copies between strided layouts (Transpose, Slice, Pad, Concat,
// Split), softmax and log-softmax per row (one thread per row, as the CPU computes it), one-hot.
#include "ops/cuda/launch.cuh"

namespace mirra::ops::cuda {

namespace {

template <class E>
__global__ void copy_box_kernel(const E* from, E* to, BoxCopy box) {
  for (int64_t i = first_index(); i < box.elements; i += grid_stride()) {
    int64_t rest = i, from_index = box.from_offset, to_index = box.to_offset;
    for (int d = box.rank - 1; d >= 0; --d) {
      const int64_t coordinate = rest % box.dims[d];
      rest /= box.dims[d];
      from_index += coordinate * box.from_strides[d];
      to_index += coordinate * box.to_strides[d];
    }
    to[to_index] = from[from_index];
  }
}

template <class T, bool kLog>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t classes) {
  for (int64_t r = first_index(); r < rows; r += grid_stride()) {
    const T* row = x + r * classes;
    T max = row[0];
    for (int64_t i = 1; i < classes; ++i) max = row[i] > max ? row[i] : max;
    T sum = 0;
    for (int64_t i = 0; i < classes; ++i) sum += std::exp(row[i] - max);
    const T log_sum = std::log(sum);
    for (int64_t i = 0; i < classes; ++i) {
      const T shifted = row[i] - max - log_sum;
      y[r * classes + i] = kLog ? shifted : std::exp(shifted);
    }
  }
}

template <class I, class T>
__global__ void one_hot_kernel(const I* indices, T* y, int64_t n, int64_t depth, T on, T off) {
  for (int64_t i = first_index(); i < n * depth; i += grid_stride()) y[i] = indices[i / depth] == i % depth ? on : off;
}

template <class E>
cudaError_t launch_copy_box(const void* from, void* to, const BoxCopy& box, cudaStream_t stream) {
  return launch(copy_box_kernel<E>, blocks_for(box.elements), kThreads, stream, static_cast<const E*>(from), static_cast<E*>(to), box);
}

}  // namespace

cudaError_t copy_box(size_t element_size, const void* from, void* to, const BoxCopy& box, cudaStream_t stream) {
  if (box.elements == 0) return cudaSuccess;
  switch (element_size) {
    case 1: return launch_copy_box<uint8_t>(from, to, box, stream);
    case 2: return launch_copy_box<uint16_t>(from, to, box, stream);
    case 4: return launch_copy_box<uint32_t>(from, to, box, stream);
    case 8: return launch_copy_box<uint64_t>(from, to, box, stream);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t softmax(DType dtype, bool log, const void* x, void* y, int64_t rows, int64_t classes, cudaStream_t stream) {
  if (rows == 0 || classes == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    const auto* px = static_cast<const T*>(x);
    auto* py = static_cast<T*>(y);
    if (log) {
      return launch(softmax_kernel<T, true>, blocks_for(rows), kThreads, stream, px, py, rows, classes);
    } else {
      return launch(softmax_kernel<T, false>, blocks_for(rows), kThreads, stream, px, py, rows, classes);
    }
  });
}

cudaError_t one_hot(DType index_dtype, DType dtype, const void* indices, void* y, int64_t n, int64_t depth, double on,
                    double off, cudaStream_t stream) {
  if (n * depth == 0) return cudaSuccess;
  return visit<int32_t, int64_t>(index_dtype, [&]<class I>(I) {
    return visit<float, double>(dtype, [&]<class T>(T) {
      return launch(one_hot_kernel<I, T>, blocks_for(n * depth), kThreads, stream, static_cast<const I*>(indices), static_cast<T*>(y),
          n, depth, static_cast<T>(on), static_cast<T>(off));
    });
  });
}

}  // namespace mirra::ops::cuda
