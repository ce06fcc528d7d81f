// A mirra graph as TensorFlow's GraphDef, for TensorBoard's graph dashboard: every node with its op,
// inputs ("node", "node:1", "^node" for a control input), device and attributes (a constant's value
// as its type only), and its outputs' shapes as `_output_shapes`, which TensorBoard draws on the
// edges. The dashboard groups nodes by the name scopes of their names (replica_0/fc1/MatMul).
#pragma once

#include <string>

#include "graph/graph.h"

namespace mirra::runner::tensorboard {

// The GraphDef, serialized.
std::string graph_def(const graph::Graph& graph);

}  // namespace mirra::runner::tensorboard
