// Structural verification of a graph that did not come from the Builder (a rewrite, a file):
// ids match positions, names are unique and non-empty, every input names an existing output,
// no node depends on itself, and the graph is acyclic.
#pragma once

#include "graph/graph.h"

namespace mirra::graph {

Status verify_structure(const Graph& graph);

}  // namespace mirra::graph
