// build_gpt: a GPT-2-style decoder (nanoGPT's model): token and learned position embeddings, pre-norm
// blocks of causal multi-head self-attention and a GELU MLP, each added to the residual stream, a
// final layer norm and the output projection tied to the token embedding; dropout (nanoGPT's places:
// the embeddings, the attention weights, each block's two outputs) keyed by example. Attention is the
// fused op (memory linear in the context) unless the attention weights are dropped, which the
// composite does. The residual stream is
// [batch x context, embedding]; attention reshapes it to [batch, heads, context, head size].
#include <cmath>
#include <limits>
#include <string>

#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

namespace {

using graph::ValueRef;

// x [rows, in] * w + b: w drawn from normal(0, stddev), b zeros (nanoGPT's Linear), in scope `name`.
ValueRef linear(graph::Builder& b, const char* name, ValueRef x, int64_t in, int64_t out, double stddev, graph::DType dtype) {
  auto scope = b.scope(name);
  const ValueRef w = ops::variable(b, "kernel", {in, out}, ops::Initializer::normal(stddev), dtype);
  const ValueRef bias = ops::variable(b, "bias", {out}, ops::Initializer::zeros(), dtype);
  return ops::bias_add(b, ops::matmul(b, x, w), bias);
}

// 0 where a position may attend (itself and before), -inf after: added to the scores, a [T, T] mask
// broadcast over the batch and the heads.
ValueRef causal_mask(graph::Builder& b, int64_t context, graph::DType dtype) {
  std::vector<double> mask(static_cast<size_t>(context * context), 0.0);
  for (int64_t i = 0; i < context; ++i) {
    for (int64_t j = i + 1; j < context; ++j) mask[static_cast<size_t>(i * context + j)] = -std::numeric_limits<double>::infinity();
  }
  if (dtype == graph::DType::f64) return ops::constant<double>(b, {context, context}, std::span<const double>(mask));
  const std::vector<float> narrow(mask.begin(), mask.end());
  return ops::constant<float>(b, {context, context}, std::span<const float>(narrow));
}

// [rows, E] -> [batch, heads, T, head size].
ValueRef split_heads(graph::Builder& b, ValueRef x, const GptOptions& o) {
  return ops::transpose(b, ops::reshape(b, x, {-1, o.context, o.heads, o.embedding / o.heads}), {0, 2, 1, 3});
}

// Dropout at the model's rate, keyed by example (nothing when the rate is 0).
ValueRef dropped(graph::Builder& b, ValueRef x, ValueRef keys, const GptOptions& o) {
  return o.dropout > 0 ? ops::dropout(b, x, keys, o.dropout) : x;
}

ValueRef attention(graph::Builder& b, ValueRef x, ValueRef keys, const GptOptions& o, double projection_stddev) {
  auto scope = b.scope("attention");
  const ValueRef qkv = linear(b, "qkv", x, o.embedding, 3 * o.embedding, 0.02, o.dtype);
  const std::vector<ValueRef> parts = ops::split(b, qkv, 1, 3);
  const ValueRef q = split_heads(b, parts[0], o), k = split_heads(b, parts[1], o), v = split_heads(b, parts[2], o);
  ValueRef weighted;
  if (o.dropout > 0 || !o.fused_attention) {
    // The composite: batched products, the mask, Softmax (and dropout on the attention weights).
    const double scale = 1.0 / std::sqrt(static_cast<double>(o.embedding / o.heads));
    const ValueRef scores = ops::add(b, ops::mul(b, ops::batch_matmul(b, q, k, false, true), ops::scalar_of(b, scale, q)),
                                     causal_mask(b, o.context, o.dtype));
    weighted = ops::batch_matmul(b, dropped(b, ops::softmax(b, scores), keys, o), v);
  } else {
    weighted = ops::scaled_dot_product_attention(b, q, k, v, {.causal = true});
  }
  const ValueRef merged = ops::reshape(b, ops::transpose(b, weighted, {0, 2, 1, 3}), {-1, o.embedding});
  return dropped(b, linear(b, "projection", merged, o.embedding, o.embedding, projection_stddev, o.dtype), keys, o);
}

ValueRef mlp(graph::Builder& b, ValueRef x, ValueRef keys, const GptOptions& o, double projection_stddev) {
  auto scope = b.scope("mlp");
  const ValueRef hidden = ops::gelu(b, linear(b, "fc", x, o.embedding, 4 * o.embedding, 0.02, o.dtype));
  return dropped(b, linear(b, "projection", hidden, 4 * o.embedding, o.embedding, projection_stddev, o.dtype), keys, o);
}

}  // namespace

LanguageModel build_gpt(graph::Builder& b, const GptOptions& o) {
  LanguageModel model;
  model.inputs = ops::placeholder(b, "inputs", graph::DType::i64, {-1, o.context});
  if (o.layers < 1 || o.heads < 1 || o.embedding < 1 || o.context < 1 || o.vocab < 1 || o.embedding % o.heads != 0 ||
      !(o.dropout >= 0 && o.dropout < 1)) {
    b.fail(graph::invalid_argument("gpt: layers, heads, embedding, context and vocab must be positive, the embedding a "
                                   "multiple of the heads, and dropout in [0, 1)"));
    return model;
  }
  const ValueRef keys = o.dropout > 0 ? ops::example_keys(b) : ValueRef{};
  auto scope = b.scope("gpt");
  const ValueRef tokens = ops::variable(b, "token_embedding", {o.vocab, o.embedding}, ops::Initializer::normal(0.02), o.dtype);
  const ValueRef positions = ops::variable(b, "position_embedding", {o.context, o.embedding}, ops::Initializer::normal(0.02), o.dtype);
  // [batch, T, E] + [T, E], as rows [batch x T, E].
  ValueRef x = ops::reshape(b, dropped(b, ops::add(b, ops::gather(b, tokens, model.inputs), positions), keys, o), {-1, o.embedding});
  // GPT-2's scaled initialisation of the projections into the residual stream.
  const double projection_stddev = 0.02 / std::sqrt(2.0 * static_cast<double>(o.layers));
  for (int64_t layer = 0; layer < o.layers; ++layer) {
    auto block = b.scope("block" + std::to_string(layer));
    x = ops::add(b, x, attention(b, ops::layer_normalization(b, "norm1", x), keys, o, projection_stddev));
    x = ops::add(b, x, mlp(b, ops::layer_normalization(b, "norm2", x), keys, o, projection_stddev));
  }
  // The output projection is the token embedding itself (weight tying): its two gradients add up.
  model.logits = ops::matmul(b, ops::layer_normalization(b, "final_norm", x), tokens, false, true);
  return model;
}

}  // namespace mirra::examples
