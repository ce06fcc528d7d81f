// What a node of a step's timeline does for the step's time, as the trace and the profile count it:
// computes, communicates (a collective: its track is the device's communication stream), or copies
// between memory spaces; and the device it runs on.
#pragma once

#include <string>

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

// "cpu:0" for a node placed nowhere (the session's default device).
inline std::string device_of(const graph::Node& node) {
  return node.device ? node.device->to_string() : std::string("cpu:0");
}

}  // namespace mirra::runner
