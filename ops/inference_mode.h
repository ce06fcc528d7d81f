// inference_copies: the values a graph computes in inference mode, beside the training ones. An op
// whose schema names a training attribute (OpSchema::training_attr: FusedBatchNormV3's is_training)
// computes differently when it is set: with the batch's statistics instead of the moving ones. For
// each root, this adds a copy of every node on a path from such an op (set) to it, the op itself
// with the attribute false, and shares the rest: the variables, the placeholders, whatever does not
// depend on the mode. Evaluation fetches the copies while training goes on through the originals,
// in one session. A root no such op reaches is its own copy, and nothing is added for it.
//
// Copies are named "inference/<name>" and keep their node's device; a copied collective meets under
// "inference/<group>", apart from the training step's. An op whose inference form its inputs do not
// allow (a FusedBatchNormV3 given no statistics) stays as it is, and is not copied on its account.
//
//   auto evaluated = ops::inference_copies(graph, ops::registry(), {loss, correct});
//   // session.run(feeds, *evaluated): the loss and correct count with the moving statistics
//   MIRRA_RETURN_IF_ERROR(ops::add_inference_values(graph, ops::registry(), signature));
//   // trainer.evaluate(data) now evaluates in inference mode
#pragma once

#include <span>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "runtime/training/trainer.h"

namespace mirra::ops {

// One value per root, in order: its inference-mode counterpart (the root itself where the mode changes
// nothing). Errors: a root outside the graph, a cycle.
graph::Expected<std::vector<graph::ValueRef>> inference_copies(graph::Graph& graph, const graph::OpRegistry& schemas,
                                                                std::span<const graph::ValueRef> roots);

// Sets signature.inference to the inference copies of its loss, correct count, loss weight and
// metrics, or leaves it absent when the mode changes none of them.
graph::Status add_inference_values(graph::Graph& graph, const graph::OpRegistry& schemas,
                                   runtime::training::TrainingGraph& signature);

}  // namespace mirra::ops
