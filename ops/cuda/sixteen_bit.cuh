// The 16-bit floats (graph/float16.h) in device code: widened to float (exact) and narrowed from it by
// CUDA's intrinsics, which round to nearest, ties to even, as the host's conversions do; and the type
// a sum of T is formed in (float for the 16-bit floats, T itself otherwise).
#pragma once

#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "graph/float16.h"

namespace mirra::ops::cuda {

template <class T>
constexpr bool kSixteenBitFloat = std::is_same_v<T, graph::bfloat16> || std::is_same_v<T, graph::float16>;

__device__ inline float widened(graph::bfloat16 x) {
  __nv_bfloat16_raw raw;
  raw.x = x.bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
__device__ inline float widened(graph::float16 x) {
  __half_raw raw;
  raw.x = x.bits;
  return __half2float(__half(raw));
}

template <class T>
__device__ T narrowed(float x) {
  T y;
  if constexpr (std::is_same_v<T, graph::bfloat16>) {
    y.bits = static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x;
  } else {
    y.bits = static_cast<__half_raw>(__float2half_rn(x)).x;
  }
  return y;
}

template <class T>
using Accumulator = std::conditional_t<kSixteenBitFloat<T>, float, T>;

template <class T>
__device__ Accumulator<T> accumulated(T x) {
  if constexpr (kSixteenBitFloat<T>) {
    return widened(x);
  } else {
    return x;
  }
}

template <class T>
__device__ T stored(Accumulator<T> x) {
  if constexpr (kSixteenBitFloat<T>) {
    return narrowed<T>(x);
  } else {
    return x;
  }
}

}  // namespace mirra::ops::cuda
