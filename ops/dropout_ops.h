// Dropout whose mask does not depend on how the batch is split: each element's draw is Philox's
// (ops/philox.h) for (the node's seed, its example's key, the element's index within the example),
// where an example's key is fed beside the batch by the input pipeline (the placeholder
// kExampleKeysPlaceholder: each example's epoch and position in the epoch's order). Mirrored over N
// devices and W workers then drops for each example exactly what one device drops, and a resumed run
// drops what the unbroken run dropped. No peer does this (TensorFlow's and PyTorch's masks come from a
// per-device generator state, so they change with the replica count).
#pragma once

#include <cstdint>
#include <string_view>

#include "graph/builder.h"

namespace mirra::ops {

using graph::Builder;
using graph::ValueRef;

// The placeholder holding each example's key, i64 [batch]; the runner's input pipeline feeds it
// (runtime::data::BatchingOptions::example_keys) when a model has it.
inline constexpr std::string_view kExampleKeysPlaceholder = "example_keys";

// The graph's example-keys placeholder, added the first time it is asked for (outside any name scope:
// the first call is made before a model opens its scopes).
ValueRef example_keys(Builder& b);

// x with each element zeroed with probability `rate` and the rest scaled by 1 / (1 - rate), in
// training; x itself in evaluation (ops/inference_mode.h). x's dim 0 holds keys.dim(0) examples'
// rows, equally many each (a [batch x T, E] residual stream, or [batch, heads, T, T] scores); the
// node's seed comes from the builder.
ValueRef dropout(Builder& b, ValueRef x, ValueRef keys, double rate);

}  // namespace mirra::ops
