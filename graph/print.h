// A graph's stable printed text: one line per node, in id order, for golden tests and `mirra
// inspect` (graph/dot.h draws it). Same graph, same text, byte for byte.
//
//   fc1/MatMul = MatMul(x, fc1/w) {transpose_a=false, transpose_b=false} : f32[?,256]
#pragma once

#include <string>

#include "graph/graph.h"

namespace mirra::graph {

std::string to_text(const Graph& graph);

}  // namespace mirra::graph
