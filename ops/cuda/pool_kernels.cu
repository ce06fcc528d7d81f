// CUDA kernels of 2-D pooling, written as the CPU's loops are so that ties and padding behave the
// same: one thread per output element forward; backward, one thread per input element gathers the
// gradient of every window that routes to it, in output order, so no atomics and the same sums.
#include "ops/cuda/launch.cuh"

namespace mirra::ops::cuda {

namespace {

struct Span {
  int64_t begin, end;
};

// The input rows (or columns) under output position `o`, padding excluded.
__device__ Span under(int64_t o, int64_t stride, int64_t pad, int64_t window, int64_t size) {
  const int64_t first = o * stride - pad;
  return {first < 0 ? 0 : first, first + window < size ? first + window : size};
}

__device__ int64_t index_of(const PoolGeometry& g, int64_t n, int64_t y, int64_t x, int64_t c, int64_t height, int64_t width) {
  return g.nchw ? ((n * g.channels + c) * height + y) * width + x : ((n * height + y) * width + x) * g.channels + c;
}

// The input index of the first largest element under output (oy, ox) of plane (n, c).
__device__ int64_t first_max(const float* x, const PoolGeometry& g, int64_t n, int64_t c, Span rows, Span columns) {
  int64_t best = index_of(g, n, rows.begin, columns.begin, c, g.height, g.width);
  for (int64_t iy = rows.begin; iy < rows.end; ++iy) {
    for (int64_t ix = columns.begin; ix < columns.end; ++ix) {
      const int64_t at = index_of(g, n, iy, ix, c, g.height, g.width);
      if (x[at] > x[best]) best = at;
    }
  }
  return best;
}

// Splits flat index i of a tensor of `height` x `width` planes into (n, y, x, c).
__device__ void coordinates(const PoolGeometry& g, int64_t i, int64_t height, int64_t width, int64_t& n, int64_t& y, int64_t& x,
                            int64_t& c) {
  if (g.nchw) {
    x = i % width;
    y = i / width % height;
    c = i / (width * height) % g.channels;
    n = i / (width * height * g.channels);
  } else {
    c = i % g.channels;
    x = i / g.channels % width;
    y = i / (g.channels * width) % height;
    n = i / (g.channels * width * height);
  }
}

template <bool kMax>
__global__ void pool_forward_kernel(const float* x, float* y, PoolGeometry g) {
  const int64_t outputs = g.batch * g.channels * g.out_height * g.out_width;
  for (int64_t i = first_index(); i < outputs; i += grid_stride()) {
    int64_t n, oy, ox, c;
    coordinates(g, i, g.out_height, g.out_width, n, oy, ox, c);
    const Span rows = under(oy, g.stride_h, g.pad_h, g.window_h, g.height);
    const Span columns = under(ox, g.stride_w, g.pad_w, g.window_w, g.width);
    if (rows.begin >= rows.end || columns.begin >= columns.end) {
      y[i] = 0;
      continue;
    }
    if constexpr (kMax) {
      y[i] = x[first_max(x, g, n, c, rows, columns)];
    } else {
      float sum = 0;
      for (int64_t iy = rows.begin; iy < rows.end; ++iy) {
        for (int64_t ix = columns.begin; ix < columns.end; ++ix) sum += x[index_of(g, n, iy, ix, c, g.height, g.width)];
      }
      y[i] = sum / static_cast<float>((rows.end - rows.begin) * (columns.end - columns.begin));
    }
  }
}

// The outputs whose window covers input position `i` along one dim: [first, last], clipped.
__device__ Span covering(int64_t i, int64_t stride, int64_t pad, int64_t window, int64_t outputs) {
  const int64_t shifted = i + pad;
  const int64_t lowest = shifted - window + 1;
  int64_t first = lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
  int64_t last = shifted / stride;
  if (last >= outputs) last = outputs - 1;
  return {first, last + 1};
}

template <bool kMax>
__global__ void pool_backward_kernel(const float* x, const float* dy, float* dx, PoolGeometry g) {
  const int64_t inputs = g.batch * g.channels * g.height * g.width;
  for (int64_t i = first_index(); i < inputs; i += grid_stride()) {
    int64_t n, iy, ix, c;
    coordinates(g, i, g.height, g.width, n, iy, ix, c);
    const Span out_rows = covering(iy, g.stride_h, g.pad_h, g.window_h, g.out_height);
    const Span out_columns = covering(ix, g.stride_w, g.pad_w, g.window_w, g.out_width);
    float sum = 0;
    for (int64_t oy = out_rows.begin; oy < out_rows.end; ++oy) {
      for (int64_t ox = out_columns.begin; ox < out_columns.end; ++ox) {
        const Span rows = under(oy, g.stride_h, g.pad_h, g.window_h, g.height);
        const Span columns = under(ox, g.stride_w, g.pad_w, g.window_w, g.width);
        const float grad = dy[index_of(g, n, oy, ox, c, g.out_height, g.out_width)];
        if constexpr (kMax) {
          if (first_max(x, g, n, c, rows, columns) == i) sum += grad;
        } else {
          sum += grad / static_cast<float>((rows.end - rows.begin) * (columns.end - columns.begin));
        }
      }
    }
    dx[i] = sum;
  }
}

}  // namespace

cudaError_t pool_forward(bool max, const float* x, float* y, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t outputs = g.batch * g.channels * g.out_height * g.out_width;
  if (outputs == 0) return cudaSuccess;
  if (max) {
    return launch(pool_forward_kernel<true>, blocks_for(outputs), kThreads, stream, x, y, g);
  } else {
    return launch(pool_forward_kernel<false>, blocks_for(outputs), kThreads, stream, x, y, g);
  }
}

cudaError_t pool_backward(bool max, const float* x, const float* dy, float* dx, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t inputs = g.batch * g.channels * g.height * g.width;
  if (inputs == 0) return cudaSuccess;
  if (max) {
    return launch(pool_backward_kernel<true>, blocks_for(inputs), kThreads, stream, x, dy, dx, g);
  } else {
    return launch(pool_backward_kernel<false>, blocks_for(inputs), kThreads, stream, x, dy, dx, g);
  }
}

}  // namespace mirra::ops::cuda
