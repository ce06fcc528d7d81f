// CUDA kernels of the sequence ops: Dropout (Philox's draws, as the CPU kernel makes them), GatherV2's
// row copies (counting the indices out of range, whose rows are zeroed), UnsortedSegmentSum (the rows
// stably sorted by id with CUB's radix sort, then each segment's rows added in their order in data:
// the CPU kernel's sums, without atomics), the row-wise optimizer updates over ids sorted the same
// way, and LayerNorm with its gradient (a block per row summing in double over a fixed tree; the
// column sums a thread per column adding the rows in order).
#include <cub/device/device_radix_sort.cuh>

#include "ops/cuda/launch.cuh"
#include "ops/elementwise_math.h"
#include "ops/philox.h"

namespace mirra::ops::cuda {

namespace {

template <class T>
__global__ void dropout_kernel(const T* x, const int64_t* keys, T* y, T* mask, int64_t n, int64_t per_example, uint64_t seed,
                               float rate, bool training) {
  const T scale = T(1) / (T(1) - static_cast<T>(rate));
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t example = i / per_example;
    const bool keep = !training || philox::uniform(seed, static_cast<uint64_t>(keys[example]),
                                                   static_cast<uint64_t>(i - example * per_example)) >= rate;
    mask[i] = keep ? (training ? scale : T(1)) : T(0);
    y[i] = training ? x[i] * mask[i] : x[i];
  }
}

template <class E, class I>
__global__ void gather_kernel(const E* params, const I* indices, E* y, int64_t outer, int64_t axis_size, int64_t inner,
                              int64_t n, unsigned long long* bad) {
  const int64_t total = outer * n * inner;
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const int64_t column = i % inner, row = i / inner;
    const int64_t o = row / n, k = row % n;
    const int64_t index = static_cast<int64_t>(indices[k]);
    if (index < 0 || index >= axis_size) {
      y[i] = E{};
      if (o == 0 && column == 0) atomicAdd(bad, 1ull);  // counted once per index
    } else {
      y[i] = params[(o * axis_size + index) * inner + column];
    }
  }
}

template <class I>
__global__ void count_past_kernel(const I* ids, int64_t n, int64_t segments, unsigned long long* bad) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    if (static_cast<int64_t>(ids[i]) >= segments) atomicAdd(bad, 1ull);
  }
}

__global__ void iota_kernel(int64_t* values, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) values[i] = i;
}

// starts[s] = the first sorted position whose id is >= s, for s in [0, segments].
template <class I>
__global__ void segment_starts_kernel(const I* sorted, int64_t n, int64_t segments, int64_t* starts) {
  for (int64_t s = first_index(); s <= segments; s += grid_stride()) {
    int64_t low = 0, high = n;
    while (low < high) {
      const int64_t middle = low + (high - low) / 2;
      if (static_cast<int64_t>(sorted[middle]) < s) low = middle + 1; else high = middle;
    }
    starts[s] = low;
  }
}

template <class T>
__global__ void segment_sum_kernel(const T* data, const int64_t* order, const int64_t* starts, T* y, int64_t segments,
                                   int64_t inner) {
  for (int64_t i = first_index(); i < segments * inner; i += grid_stride()) {
    const int64_t s = i / inner, column = i % inner;
    T sum = 0;
    for (int64_t k = starts[s]; k < starts[s + 1]; ++k) sum += data[order[k] * inner + column];
    y[i] = sum;
  }
}

// Each position k of the sorted indices that starts its index's run sums the run's rows in their
// order, column by column, and updates that row of the variable through `rule.bound()`, the update
// with its scalars read from the device once per thread.
template <class T, class I, class Rule>
__global__ void sparse_update_kernel(const T* rows, const I* sorted, const int64_t* order, int64_t count, int64_t width,
                                     int64_t limit, const bool* gate, Rule rule) {
  if (gate != nullptr && !*gate) return;
  const auto apply = rule.bound();
  for (int64_t i = first_index(); i < count * width; i += grid_stride()) {
    const int64_t k = i / width, column = i % width;
    const I index = sorted[k];
    if (index < 0 || static_cast<int64_t>(index) >= limit || (k > 0 && sorted[k - 1] == index)) continue;
    T sum = 0;
    for (int64_t p = k; p < count && sorted[p] == index; ++p) sum += rows[order[p] * width + column];
    apply(static_cast<int64_t>(index) * width + column, sum);
  }
}

template <class T>
struct DescentRows {
  T* variable;
  const T* learning_rate;
  __device__ auto bound() const {
    return [variable = variable, update = math::GradientDescentUpdate<T>{*learning_rate}](int64_t at, T gradient) {
      update.apply(variable[at], gradient);
    };
  }
};

template <class T, bool kNesterov>
struct MomentumRows {
  T* variable;
  T* accumulator;
  const T* learning_rate;
  T momentum;
  __device__ auto bound() const {
    return [variable = variable, accumulator = accumulator,
            update = math::MomentumUpdate<T, kNesterov>{*learning_rate, momentum}](int64_t at, T gradient) {
      update.apply(variable[at], accumulator[at], gradient);
    };
  }
};

// The bias corrections of step + 1 in double, as ApplyAdam's kernels fold them.
template <class T>
struct AdamRows {
  T *variable, *m, *v;
  const T* learning_rate;
  const int64_t* step;
  double beta1, beta2, epsilon;
  __device__ auto bound() const {
    const double rate = static_cast<double>(*learning_rate), t = static_cast<double>(*step + 1);
    const math::AdamUpdate<T> update{static_cast<T>(beta1),
                                     static_cast<T>(beta2),
                                     static_cast<T>(rate / (1.0 - pow(beta1, t))),
                                     static_cast<T>(1.0 / sqrt(1.0 - pow(beta2, t))),
                                     T(1),
                                     static_cast<T>(epsilon)};
    return [variable = variable, m = m, v = v, update](int64_t at, T gradient) {
      update.apply(variable[at], m[at], v[at], gradient);
    };
  }
};

// `ids` sorted with their positions into scratch's sorted_ids and order (stable: equal ids keep their
// order), each id at or past `limit` counted into *bad.
template <class I>
cudaError_t sort_ids(const I* ids, int64_t rows, int64_t limit, const SegmentScratch& scratch, unsigned long long* bad,
                     cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  cudaError_t result = launch(count_past_kernel<I>, blocks_for(rows), kThreads, stream, ids, rows, limit, bad);
  if (result == cudaSuccess) result = launch(iota_kernel, blocks_for(rows), kThreads, stream, scratch.rows, rows);
  if (result != cudaSuccess) return result;
  size_t bytes = scratch.sort_bytes;
  return cub::DeviceRadixSort::SortPairs(scratch.sort, bytes, ids, static_cast<I*>(scratch.sorted_ids), scratch.rows, scratch.order,
                                         rows, 0, static_cast<int>(sizeof(I) * 8), stream);
}

template <class T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* offset, T* y, T* mean, T* rstd, int64_t rows,
                                  int64_t columns, double epsilon) {
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * columns;
    double mine = 0;
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) mine += static_cast<double>(xr[c]);
    const double mu = block_sum(mine, partial) / static_cast<double>(columns);
    mine = 0;
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
      const double d = static_cast<double>(xr[c]) - mu;
      mine += d * d;
    }
    const double inv = 1.0 / sqrt(block_sum(mine, partial) / static_cast<double>(columns) + epsilon);
    if (threadIdx.x == 0) {
      mean[row] = static_cast<T>(mu);
      rstd[row] = static_cast<T>(inv);
    }
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
      y[row * columns + c] =
          static_cast<T>((static_cast<double>(xr[c]) - mu) * inv * static_cast<double>(scale[c]) + static_cast<double>(offset[c]));
    }
  }
}

template <class T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const T* scale, const T* mean, const T* rstd, T* dx, int64_t rows,
                                     int64_t columns) {
  __shared__ double partial[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = dy + row * columns;
    const T* xr = x + row * columns;
    const double mu = static_cast<double>(mean[row]), inv = static_cast<double>(rstd[row]);
    double sum = 0, dot = 0;
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
      const double scaled = static_cast<double>(gr[c]) * static_cast<double>(scale[c]);
      sum += scaled;
      dot += scaled * (static_cast<double>(xr[c]) - mu) * inv;
    }
    const double mean_scaled = block_sum(sum, partial) / static_cast<double>(columns);
    const double mean_dot = block_sum(dot, partial) / static_cast<double>(columns);
    for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
      const double xhat = (static_cast<double>(xr[c]) - mu) * inv;
      dx[row * columns + c] =
          static_cast<T>(inv * (static_cast<double>(gr[c]) * static_cast<double>(scale[c]) - mean_scaled - xhat * mean_dot));
    }
  }
}

template <class T>
__global__ void layer_norm_parameter_grad_kernel(const T* dy, const T* x, const T* mean, const T* rstd, T* dscale, T* doffset,
                                                 int64_t rows, int64_t columns) {
  for (int64_t c = first_index(); c < columns; c += grid_stride()) {
    double scale_sum = 0, offset_sum = 0;
    for (int64_t row = 0; row < rows; ++row) {
      const double grad = static_cast<double>(dy[row * columns + c]);
      scale_sum += grad * (static_cast<double>(x[row * columns + c]) - static_cast<double>(mean[row])) * static_cast<double>(rstd[row]);
      offset_sum += grad;
    }
    dscale[c] = static_cast<T>(scale_sum);
    doffset[c] = static_cast<T>(offset_sum);
  }
}

template <class E>
cudaError_t launch_gather(DType index_dtype, const void* params, const void* indices, void* y, const GatherRows& g,
                          unsigned long long* bad, cudaStream_t stream) {
  return visit<int32_t, int64_t>(index_dtype, [&]<class I>(I) {
    return launch(gather_kernel<E, I>, blocks_for(g.outer * g.indices * g.inner), kThreads, stream, static_cast<const E*>(params),
                  static_cast<const I*>(indices), static_cast<E*>(y), g.outer, g.axis_size, g.inner, g.indices, bad);
  });
}

}  // namespace

cudaError_t dropout(DType dtype, const void* x, const int64_t* keys, void* y, void* mask, int64_t n, int64_t per_example,
                    uint64_t seed, double rate, bool training, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(dropout_kernel<T>, blocks_for(n), kThreads, stream, static_cast<const T*>(x), keys, static_cast<T*>(y),
                  static_cast<T*>(mask), n, per_example, seed, static_cast<float>(rate), training);
  });
}

cudaError_t gather(size_t element_size, DType index_dtype, const void* params, const void* indices, void* y, const GatherRows& g,
                   unsigned long long* bad, cudaStream_t stream) {
  if (g.outer * g.indices * g.inner == 0) return cudaSuccess;
  switch (element_size) {
    case 1: return launch_gather<uint8_t>(index_dtype, params, indices, y, g, bad, stream);
    case 2: return launch_gather<uint16_t>(index_dtype, params, indices, y, g, bad, stream);
    case 4: return launch_gather<uint32_t>(index_dtype, params, indices, y, g, bad, stream);
    case 8: return launch_gather<uint64_t>(index_dtype, params, indices, y, g, bad, stream);
    default: return cudaErrorNotSupported;
  }
}

size_t segment_sum_scratch_bytes(DType id_dtype, int64_t rows) {
  size_t bytes = 0;
  (void)visit<int32_t, int64_t>(id_dtype, [&]<class I>(I) {
    return cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const I*>(nullptr), static_cast<I*>(nullptr),
                                           static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), rows);
  });
  return bytes;
}

cudaError_t unsorted_segment_sum(DType dtype, DType id_dtype, const void* data, const void* ids, void* y, int64_t rows,
                                 int64_t inner, int64_t segments, const SegmentScratch& scratch, unsigned long long* bad,
                                 cudaStream_t stream) {
  return visit<int32_t, int64_t>(id_dtype, [&]<class I>(I) {
    const I* sorted = static_cast<const I*>(scratch.sorted_ids);
    cudaError_t result = sort_ids(static_cast<const I*>(ids), rows, segments, scratch, bad, stream);
    if (result != cudaSuccess) return result;
    result = launch(segment_starts_kernel<I>, blocks_for(segments + 1), kThreads, stream, static_cast<const I*>(sorted),
                                rows, segments, scratch.starts);
    if (result != cudaSuccess || segments * inner == 0) return result;
    return visit<float, double, int32_t, int64_t>(dtype, [&]<class T>(T) {
      return launch(segment_sum_kernel<T>, blocks_for(segments * inner), kThreads, stream, static_cast<const T*>(data), scratch.order,
                    scratch.starts, static_cast<T*>(y), segments, inner);
    });
  });
}

cudaError_t sparse_apply(DType dtype, const SparseUpdate& update, const SparseRows& rows, const SegmentScratch& scratch,
                         unsigned long long* bad, cudaStream_t stream) {
  return visit<int32_t, int64_t>(rows.index_dtype, [&]<class I>(I) {
    cudaError_t result = sort_ids(static_cast<const I*>(rows.indices), rows.count, rows.limit, scratch, bad, stream);
    if (result != cudaSuccess || rows.count * rows.width == 0) return result;
    const I* sorted = static_cast<const I*>(scratch.sorted_ids);
    return visit<float, double>(dtype, [&]<class T>(T) {
      const auto run = [&](auto rule) {
        return launch(sparse_update_kernel<T, I, decltype(rule)>, blocks_for(rows.count * rows.width), kThreads, stream,
                      static_cast<const T*>(rows.rows), sorted, static_cast<const int64_t*>(scratch.order), rows.count,
                      rows.width, rows.limit, update.gate, rule);
      };
      T* variable = static_cast<T*>(update.variable);
      const T* rate = static_cast<const T*>(update.learning_rate);
      switch (update.rule) {
        case SparseRule::gradient_descent: return run(DescentRows<T>{variable, rate});
        case SparseRule::momentum:
          return run(MomentumRows<T, false>{variable, static_cast<T*>(update.first_slot), rate, static_cast<T>(update.momentum)});
        case SparseRule::nesterov_momentum:
          return run(MomentumRows<T, true>{variable, static_cast<T*>(update.first_slot), rate, static_cast<T>(update.momentum)});
        case SparseRule::adam:
          return run(AdamRows<T>{variable, static_cast<T*>(update.first_slot), static_cast<T*>(update.second_slot), rate,
                                 update.step, update.beta1, update.beta2, update.epsilon});
      }
      return cudaErrorNotSupported;
    });
  });
}

cudaError_t layer_norm(DType dtype, const void* x, const void* scale, const void* offset, void* y, void* mean, void* rstd,
                       int64_t rows, int64_t columns, double epsilon, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return visit<float, double>(dtype, [&]<class T>(T) {
    return launch(layer_norm_kernel<T>, static_cast<unsigned>(std::min<int64_t>(rows, 65535)), kThreads, stream,
                  static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(offset), static_cast<T*>(y),
                  static_cast<T*>(mean), static_cast<T*>(rstd), rows, columns, epsilon);
  });
}

cudaError_t layer_norm_grad(DType dtype, const void* dy, const void* x, const void* scale, const void* mean, const void* rstd,
                            void* dx, void* dscale, void* doffset, int64_t rows, int64_t columns, cudaStream_t stream) {
  return visit<float, double>(dtype, [&]<class T>(T) {
    cudaError_t result = cudaSuccess;
    if (rows > 0) {
      result = launch(layer_norm_dx_kernel<T>, static_cast<unsigned>(std::min<int64_t>(rows, 65535)), kThreads, stream,
                      static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(mean),
                      static_cast<const T*>(rstd), static_cast<T*>(dx), rows, columns);
    }
    if (result != cudaSuccess || columns == 0) return result;
    return launch(layer_norm_parameter_grad_kernel<T>, blocks_for(columns), kThreads, stream, static_cast<const T*>(dy),
                  static_cast<const T*>(x), static_cast<const T*>(mean), static_cast<const T*>(rstd), static_cast<T*>(dscale),
                  static_cast<T*>(doffset), rows, columns);
  });
}

}  // namespace mirra::ops::cuda
