// Graphviz DOT of a graph, drawn for a person: each device a cluster, each name scope a cluster nested
// in it, and with `collapse_below` d > 0 every scope d names deep drawn as one box for all its nodes on
// that device (the box says how many nodes and which ops it holds), with one edge between two boxes
// however many values flow between them; d = 0 draws every node, its edges labelled with their
// values' types. A caller that knows the ops says what each node is for (`role`): collectives
// (hexagons, labelled with their bucket's size per participant; collapsed, a collective's ranks on one
// device, which name one `group`, are one hexagon), copies between memory spaces (arrows) and batch
// splits (trapezia) are never collapsed into scopes and each has its colour; variables are cylinders.
// Same graph and options, same text.
//
//   std::string dot = to_dot(graph, {.collapse_below = 2, .role = [](const Node& n) { ... }});
#pragma once

#include <functional>
#include <string>

#include "graph/graph.h"

namespace mirra::graph {

enum class DotRole { plain, collective, copy, batch_split, variable };

struct DotOptions {
  int collapse_below = 0;  // scope depth drawn as one box; 0: every node
  std::function<DotRole(const Node&)> role;  // none: every node plain
};

std::string to_dot(const Graph& graph, const DotOptions& options = {});

}  // namespace mirra::graph
