// Attention as one op (mirra's own): ScaledDotProductAttention computes softmax(q k^T * scale + mask)
// v per batch and head without ever holding the [T, S] scores of a head: the keys are visited in
// tiles with an online softmax (FlashAttention-2's scheme), so its memory grows linearly in the
// sequence. It also returns each query's log-sum-exp of its scores, from which the gradient op
// recomputes the probabilities tile by tile (the backward pass holds no [T, S] matrix either).
// The composite (batched products, the mask, Softmax) computes the same and stays as its reference.
#pragma once

#include <optional>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

struct AttentionOptions {
  bool causal = false;           // query i attends keys 0..i only
  std::optional<double> scale;   // default 1 / sqrt(head size)
  ValueRef mask;                 // optional additive mask, [T, S] or [B or 1, H or 1, T, S]
};

// q [batch, heads, T, d], k [batch, heads, S, d], v [batch, heads, S, e] -> [batch, heads, T, e]. A
// query none of whose keys may be attended (a row the mask makes all -inf) gives zeros.
ValueRef scaled_dot_product_attention(Builder& b, ValueRef q, ValueRef k, ValueRef v, const AttentionOptions& options = {});

}  // namespace mirra::ops
