// reduce_into: sums, means or maxima of a tensor over sorted, unique axes, written in the order of the
// kept dims. Each output element is accumulated in a fixed order by one thread, so results do not
// depend on the thread count. Shared by the reductions and by the gradient's SumToShape. Reductions
// over leading dims (bias gradients, batch sums) take a vectorised path with the same order.
#pragma once

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/parallel.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

enum class Reduction { sum, mean, max };

using runtime::Tensor;

// What a reduction over nothing gives, as in TensorFlow: 0 for sums and means (a floating mean then
// divides by 0: NaN), -infinity for floating maxima and the lowest value for integer ones.
template <class T, Reduction kReduction>
constexpr T reduction_identity() {
  if constexpr (kReduction != Reduction::max) return T(0);
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}

// One step of a reduction; a maximum keeps a NaN once it has seen one (TensorFlow's rule).
template <class T, Reduction kReduction>
inline T reduce_step(T acc, T v) {
  if constexpr (kReduction == Reduction::max) return (v > acc || v != v) ? v : acc;
  return acc + v;
}

// The mean of `count` elements summing to `sum`; an integer mean of nothing is 0, as in TensorFlow.
template <class T>
inline T mean_of(T sum, int64_t count) {
  if constexpr (std::is_integral_v<T>) {
    if (count == 0) return T(0);
  }
  return sum / static_cast<T>(count);
}

// Reduction over the leading dims: out[j] = reduce over i of in[i * inner + j], visiting i in order
// (the order of the general loop below, so both give the same bits), vectorised along j.
template <class T, Reduction kReduction>
void reduce_leading_into(const T* in, int64_t outer, int64_t inner, T* out) {
  const T init = reduction_identity<T, kReduction>();
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(outer * kBlock, 1));
  cpu::parallel_for(blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t j0 = block * kBlock, j1 = std::min(inner, j0 + kBlock);
      T* acc = out + j0;
      std::fill(acc, acc + (j1 - j0), init);
      for (int64_t i = 0; i < outer; ++i) {
        const T* row = in + i * inner + j0;
        for (int64_t j = 0; j < j1 - j0; ++j) acc[j] = reduce_step<T, kReduction>(acc[j], row[j]);
      }
      if (kReduction == Reduction::mean) {
        for (int64_t j = 0; j < j1 - j0; ++j) acc[j] = mean_of(acc[j], outer);
      }
    }
  });
}

template <class T, Reduction kReduction>
void reduce_into(const Tensor& x, const std::vector<int>& axes, T* out) {
  const int rank = x.rank();
  bool leading = !axes.empty() && static_cast<int>(axes.size()) < rank;
  for (size_t i = 0; leading && i < axes.size(); ++i) leading = axes[i] == static_cast<int>(i);
  if (leading) {
    int64_t outer = 1;
    for (size_t i = 0; i < axes.size(); ++i) outer *= x.dim(static_cast<int>(i));
    if (outer > 0) return reduce_leading_into<T, kReduction>(x.data<T>(), outer, x.num_elements() / outer, out);
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int axis : axes) reduced[static_cast<size_t>(axis)] = true;
  // Dims and input strides of the kept dims (in output order) and of the reduced dims.
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = stride;
    stride *= x.dim(d);
  }
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (int d = 0; d < rank; ++d) {
    const bool is_reduced = reduced[static_cast<size_t>(d)];
    (is_reduced ? red_dims : kept_dims).push_back(x.dim(d));
    (is_reduced ? red_strides : kept_strides).push_back(strides[static_cast<size_t>(d)]);
  }
  int64_t outputs = 1, count = 1;
  for (int64_t d : kept_dims) outputs *= d;
  for (int64_t d : red_dims) count *= d;
  const T* in = x.data<T>();
  const T init = reduction_identity<T, kReduction>();
  const int64_t grain = std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(count, 1));
  cpu::parallel_for(outputs, grain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(red_dims.size());
    for (int64_t o = begin; o < end; ++o) {
      int64_t base = 0, rest = o;
      for (size_t k = kept_dims.size(); k-- > 0;) {
        base += (rest % kept_dims[k]) * kept_strides[k];
        rest /= kept_dims[k];
      }
      T acc = init;
      std::fill(index.begin(), index.end(), 0);
      int64_t offset = base;
      for (int64_t r = 0; r < count; ++r) {
        const T v = in[offset];
        acc = reduce_step<T, kReduction>(acc, v);
        // Odometer step over the reduced dims, innermost first.
        for (size_t k = red_dims.size(); k-- > 0;) {
          offset += red_strides[k];
          if (++index[k] < red_dims[k]) break;
          offset -= red_strides[k] * red_dims[k];
          index[k] = 0;
        }
      }
      out[o] = kReduction == Reduction::mean ? mean_of(acc, count) : acc;
    }
  });
}

}  // namespace mirra::ops::cpu
