// build_bigram: a bigram language model, each next token's logits a row of a [vocab, vocab] table
// chosen by the token before it (one-hot times the table).
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

LanguageModel build_bigram(graph::Builder& b, int64_t vocab, int64_t context) {
  LanguageModel model;
  model.inputs = ops::placeholder(b, "inputs", graph::DType::i64, {-1, context});
  auto scope = b.scope("bigram");
  auto table = ops::variable(b, "table", {vocab, vocab}, ops::Initializer::zeros());
  model.logits = ops::matmul(b, ops::one_hot(b, ops::reshape(b, model.inputs, {-1}), vocab), table);
  return model;
}

}  // namespace mirra::examples
