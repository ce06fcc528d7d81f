// Node and ValueRef: a node is one op application; a ValueRef names one of its outputs. Data edges
// are implicit in each node's inputs; control edges ("run after") in its control_inputs.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "graph/attr.h"
#include "graph/device_id.h"
#include "graph/tensor_type.h"

namespace mirra::graph {

using NodeId = uint32_t;
inline constexpr NodeId kInvalidNode = std::numeric_limits<NodeId>::max();

// "Output `output` of node `node`". A default ValueRef is invalid (the builder returns one on error).
struct ValueRef {
  NodeId node = kInvalidNode;
  uint16_t output = 0;

  bool valid() const { return node != kInvalidNode; }
  friend auto operator<=>(const ValueRef&, const ValueRef&) = default;
};

struct Node {
  NodeId id = kInvalidNode;
  std::string op;
  std::string name;
  std::vector<ValueRef> inputs;
  std::vector<NodeId> control_inputs;
  AttrMap attrs;
  std::vector<TensorType> outputs;
  std::optional<DeviceId> device;
};

}  // namespace mirra::graph
