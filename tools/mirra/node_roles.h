// What a node of a step's timeline does for the step's time, as the trace and the profile count it:
// computes, communicates (a collective: its track is the device's communication stream), or copies
// between memory spaces; how a picture of the graph draws it; and the device it runs on.
#pragma once

#include <string>

#include "graph/dot.h"
#include "graph/node.h"
#include "ops/registry.h"
#include "runtime/placement.h"

namespace mirra::runner {

enum class NodeRole { compute, collective, copy };

inline NodeRole role_of(const graph::Node& node) {
  const graph::OpSchema* schema = ops::registry().find(node.op);
  if (schema != nullptr && schema->has(graph::kCollective)) return NodeRole::collective;
  if (node.op == runtime::kCopyToHostOp || node.op == runtime::kCopyFromHostOp) return NodeRole::copy;
  return NodeRole::compute;
}

// How a picture of the graph (graph/dot.h) draws the node.
inline graph::DotRole dot_role(const graph::Node& node) {
  switch (role_of(node)) {
    case NodeRole::collective: return graph::DotRole::collective;
    case NodeRole::copy: return graph::DotRole::copy;
    case NodeRole::compute: break;
  }
  if (node.op == "SplitBatch") return graph::DotRole::batch_split;
  if (node.op == "Variable") return graph::DotRole::variable;
  return graph::DotRole::plain;
}

// "cpu:0" for a node placed nowhere (the session's default device).
inline std::string device_of(const graph::Node& node) {
  return node.device ? node.device->to_string() : std::string("cpu:0");
}

}  // namespace mirra::runner
