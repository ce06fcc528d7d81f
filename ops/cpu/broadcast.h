// NumPy broadcasting at run time: the output shape of two tensors, an input's strides over it, and a loop that applies a binary
// function over it with per-input strides (0 along broadcast dims), in parallel rows.
#pragma once

#include <optional>

#include "ops/cpu/parallel.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

std::optional<runtime::TensorShape> broadcast_shape(const runtime::TensorShape& a, const runtime::TensorShape& b);
// The strides of `in` over the dims of `out`, a shape it broadcasts to (0 along the dims broadcast).
void broadcast_strides(const runtime::TensorShape& in, const runtime::TensorShape& out, int64_t* strides);

// out[i] = f(a[ia], b[ib]) over out's shape, which must be broadcast_shape(a, b).
template <class A, class B, class Out, class F>
void broadcast_apply(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out, F f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  Out* po = out.mutable_data<Out>();
  const int64_t n = out.num_elements();
  if (a.shape() == b.shape()) {
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], pb[i]);
    });
    return;
  }
  if (b.num_elements() == 1 && a.num_elements() == n) {
    const B scalar = pb[0];
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(pa[i], scalar);
    });
    return;
  }
  if (a.num_elements() == 1 && b.num_elements() == n) {
    const A scalar = pa[0];
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = f(scalar, pb[i]);
    });
    return;
  }
  // General case: strides of a and b over out's dims (0 where broadcast), rows of the last dim.
  const int rank = out.rank();
  int64_t stride_a[runtime::kMaxRank] = {}, stride_b[runtime::kMaxRank] = {};
  broadcast_strides(a.shape(), out.shape(), stride_a);
  broadcast_strides(b.shape(), out.shape(), stride_b);
  const int64_t inner = rank > 0 ? out.dim(rank - 1) : 1;
  if (inner == 0) return;
  const int64_t rows = n / inner;
  const int64_t ia_step = rank > 0 ? stride_a[rank - 1] : 0;
  const int64_t ib_step = rank > 0 ? stride_b[rank - 1] : 0;
  parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / inner), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t offset_a = 0, offset_b = 0, rest = row;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t index = rest % out.dim(d);
        rest /= out.dim(d);
        offset_a += index * stride_a[d];
        offset_b += index * stride_b[d];
      }
      Out* row_out = po + row * inner;
      for (int64_t i = 0; i < inner; ++i) row_out[i] = f(pa[offset_a + i * ia_step], pb[offset_b + i * ib_step]);
    }
  });
}

}  // namespace mirra::ops::cpu
