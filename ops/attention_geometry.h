// The sizes of a ScaledDotProductAttention, as its CPU and GPU kernels take them (plain data, for
// device code too): q [batch, heads, t, d], k [.., s, d], v [.., s, e], the scale, causality, and the
// additive mask's element strides over (batch, heads, t, s), 0 along a dim it is broadcast over.
#pragma once

#include <cstdint>

namespace mirra::ops {

struct AttentionGeometry {
  int64_t batch = 0, heads = 0, t = 0, s = 0, d = 0, e = 0;
  double scale = 1;
  bool causal = false;
  int64_t mask_strides[4] = {};
};

}  // namespace mirra::ops
