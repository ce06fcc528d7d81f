// reduce_into: sums, means or maxima of a tensor over sorted, unique axes, written in the order of the
// kept dims. Each output element is accumulated in a fixed order by one thread, so results do not
// depend on the thread count. Shared by the reductions and by the gradient's SumToShape.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "ops/cpu/parallel.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

enum class Reduction { sum, mean, max };

using runtime::Tensor;

template <class T, Reduction kReduction>
void reduce_into(const Tensor& x, const std::vector<int>& axes, T* out) {
  const int rank = x.rank();
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
  const T init = kReduction == Reduction::max ? std::numeric_limits<T>::lowest() : T(0);
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
        acc = kReduction == Reduction::max ? std::max(acc, v) : acc + v;
        // Odometer step over the reduced dims, innermost first.
        for (size_t k = red_dims.size(); k-- > 0;) {
          offset += red_strides[k];
          if (++index[k] < red_dims[k]) break;
          offset -= red_strides[k] * red_dims[k];
          index[k] = 0;
        }
      }
      out[o] = kReduction == Reduction::mean ? acc / static_cast<T>(count) : acc;
    }
  });
}

}  // namespace mirra::ops::cpu
