// build_embedding_bag: a classifier of bags of ids (a recommendation model's sparse features): each
// example's ids looked up in one table, averaged (PyTorch's EmbeddingBag in mode "mean"), and a
// dense layer to the classes.
#include "examples/models.h"
#include "ops/ops.h"

namespace mirra::examples {

Classifier build_embedding_bag(graph::Builder& b, const EmbeddingBagOptions& options) {
  Classifier model;
  model.images = ops::placeholder(b, "ids", graph::DType::i64, {-1, options.ids});
  graph::ValueRef pooled;
  {
    auto scope = b.scope("embedding");
    auto table = ops::variable(b, "table", {options.rows, options.width}, ops::Initializer::normal(0.05));
    pooled = ops::reduce_mean(b, ops::gather(b, table, model.images), {1});
  }
  model.logits = dense(b, "logits", pooled, options.width, options.classes, false);
  return model;
}

}  // namespace mirra::examples
