// What replicate needs of a loss: the one mean over the batch it contains, and the loss built again
// around another value of that mean (the mean over the global batch) for the reported metric.
//
// A loss replicate reports exactly is a ReduceMean of every element of a value computed from the
// batch (per-example losses [B], per-token losses [B, T], per-output errors [B, k], ...), or, when the
// signature declares a loss weight w (the tokens a mask keeps: a masked language model's loss), a
// Div of a value computed from the batch (the masked losses' sum) by w, combined
// with terms that do not depend on any batch input (a weight decay, Keras's kernel_regularizer) by
// Add and Sub, scaled by such terms through Mul and Div, and passed through ops that move values
// unchanged (Identity, Reshape: their schemas' moves_values). Every one of those is linear in the mean, so scaling each replica's gradient seed by its share of the batch stays
// exact for the whole loss.
#pragma once

#include <functional>
#include <vector>

#include "graph/builder.h"
#include "graph/graph.h"

namespace mirra::strategies {

// The ReduceMean the loss is built around (or, given a valid `loss_weight`, the Div by it), given which
// nodes depend on a batch input and the schemas the graph was built with. An error
// (invalid_argument) names the node that breaks the shape above and says what is supported.
graph::Expected<graph::NodeId> batch_mean_of(const graph::Graph& g, const graph::OpRegistry& schemas, graph::ValueRef loss,
                                             const std::vector<bool>& from_batch, graph::ValueRef loss_weight = {});

// The loss built again with `b`: `mean` in place of the batch mean `mean_node`, term(v) for each value
// v that does not depend on the batch, and each node between them added again through `b` and handed
// to place() (where it goes). REQUIRES: batch_mean_of(g, loss, from_batch) gave mean_node.
graph::ValueRef rebuild_loss(graph::Builder& b, const graph::Graph& g, graph::ValueRef loss, graph::NodeId mean_node,
                             graph::ValueRef mean, const std::vector<bool>& from_batch,
                             const std::function<graph::ValueRef(graph::ValueRef)>& term,
                             const std::function<graph::ValueRef(graph::ValueRef)>& place);

}  // namespace mirra::strategies
