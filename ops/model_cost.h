// What a model's forward pass computes per example, counted as multiply-adds of its convolutions,
// matrix products (MatMul, BatchMatMulV2) and attentions (q k^T and P v, the whole score matrix even
// where causality masks it) (the convention of the ResNet paper's "FLOPs" and of torchvision's GFLOPS column:
// ResNet-50 at 224x224 is about 4.1 G; twice that counts a multiply and an add apart). Element-wise
// ops, batch normalisation and pooling are not counted: they are a few percent more.
//
//   auto cost = ops::forward_cost(model.graph, {model.signature.loss.node});
//   std::printf("%.2f G multiply-adds per example\n", cost->multiply_adds * 1e-9);
#pragma once

#include <cstdint>
#include <span>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace mirra::ops {

struct ForwardCost {
  int64_t multiply_adds = 0;  // per example
  int64_t convolutions = 0, matrix_products = 0, attentions = 0;  // the nodes counted
  int64_t attention_multiply_adds = 0;  // of the ScaledDotProductAttention nodes (in multiply_adds too)
};

// Over the nodes `roots` need, with the placeholders' batch dims bound to one example and the shapes
// inferred again from `schemas`. Errors: a cyclic graph; a counted node whose shapes stay unknown.
graph::Expected<ForwardCost> forward_cost(const graph::Graph& graph, std::span<const graph::NodeId> roots,
                                          const graph::OpRegistry& schemas);

}  // namespace mirra::ops
