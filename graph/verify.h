// Verification of a graph that did not come from the Builder (a rewrite, a file). verify_structure:
// ids match positions, names are unique and non-empty, every input names an existing output, no node
// depends on itself, and the graph is acyclic. verify_types: each node still passes its op's schema
// with the types it reads now and declares the outputs that schema infers, so a rewrite that leaves a
// node its kernels cannot take is caught as such, not by a kernel reading the wrong type.
#pragma once

#include <span>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace mirra::graph {

Status verify_structure(const Graph& graph);

// Checks the nodes that `needed_for` depend on (themselves included), or every node when it is
// empty: a rewrite may leave nodes that nothing runs any more (an unfused original) reading values
// it changed. REQUIRES: verify_structure(graph) is ok.
Status verify_types(const Graph& graph, const OpRegistry& registry, std::span<const NodeId> needed_for = {});

}  // namespace mirra::graph
