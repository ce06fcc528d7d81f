// Graph storage, naming and topological order.
#include "graph/graph.h"

#include <queue>

#include "graph/check.h"

namespace mirra::graph {

NodeId Graph::add_node(Node node) {
  MIRRA_CHECK(!contains(node.name), node.name);
  node.id = static_cast<NodeId>(nodes_.size());
  by_name_.emplace(node.name, node.id);
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

const Node& Graph::node(NodeId id) const {
  MIRRA_CHECK(id < nodes_.size());
  return nodes_[id];
}

Node& Graph::mutable_node(NodeId id) {
  MIRRA_CHECK(id < nodes_.size());
  return nodes_[id];
}

const TensorType& Graph::type(ValueRef value) const {
  const Node& producer = node(value.node);
  MIRRA_CHECK(value.output < producer.outputs.size(), producer.name);
  return producer.outputs[value.output];
}

std::optional<NodeId> Graph::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::string Graph::unique_name(std::string_view base) {
  if (!contains(base)) return std::string(base);
  int& suffix = last_suffix_[std::string(base)];
  for (;;) {
    std::string candidate = std::string(base) + "_" + std::to_string(++suffix);
    if (!contains(candidate)) return candidate;
  }
}

void Graph::add_control_edge(NodeId from, NodeId to) {
  MIRRA_CHECK(from < nodes_.size() && to < nodes_.size());
  auto& controls = nodes_[to].control_inputs;
  for (NodeId existing : controls) {
    if (existing == from) return;
  }
  controls.push_back(from);
}

void Graph::replace_all_uses(ValueRef from, ValueRef to) {
  for (Node& n : nodes_) {
    for (ValueRef& input : n.inputs) {
      if (input == from) input = to;
    }
  }
}

std::vector<NodeId> Graph::keep_only(const std::vector<bool>& keep) {
  MIRRA_CHECK(keep.size() == nodes_.size());
  std::vector<NodeId> moved(nodes_.size(), kInvalidNode);
  std::vector<Node> kept;
  for (Node& node : nodes_) {
    if (!keep[node.id]) continue;
    moved[node.id] = static_cast<NodeId>(kept.size());
    kept.push_back(std::move(node));
  }
  by_name_.clear();
  for (Node& node : kept) {
    node.id = moved[node.id];
    for (ValueRef& input : node.inputs) {
      MIRRA_CHECK(moved[input.node] != kInvalidNode, node.name + " reads a removed node");
      input.node = moved[input.node];
    }
    for (NodeId& control : node.control_inputs) {
      MIRRA_CHECK(moved[control] != kInvalidNode, node.name + " waits for a removed node");
      control = moved[control];
    }
    by_name_.emplace(node.name, node.id);
  }
  nodes_ = std::move(kept);
  return moved;
}

Expected<std::vector<NodeId>> Graph::topological_order() const {
  const size_t n = nodes_.size();
  std::vector<uint32_t> pending(n, 0);
  std::vector<std::vector<NodeId>> consumers(n);
  for (const Node& node : nodes_) {
    auto depend = [&](NodeId producer) {
      if (producer >= n) return;
      ++pending[node.id];
      consumers[producer].push_back(node.id);
    };
    for (ValueRef input : node.inputs) depend(input.node);
    for (NodeId control : node.control_inputs) depend(control);
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId id = 0; id < n; ++id) {
    if (pending[id] == 0) ready.push(id);
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (NodeId consumer : consumers[id]) {
      if (--pending[consumer] == 0) ready.push(consumer);
    }
  }
  if (order.size() != n) {
    for (NodeId id = 0; id < n; ++id) {
      if (pending[id] != 0) {
        return invalid_argument("graph has a cycle through node '" + nodes_[id].name + "'");
      }
    }
  }
  return order;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> consumers(nodes_.size());
  for (const Node& node : nodes_) {
    for (const ValueRef input : node.inputs) {
      if (input.node < nodes_.size()) consumers[input.node].push_back(node.id);
    }
    for (const NodeId control : node.control_inputs) consumers[control].push_back(node.id);
  }
  return consumers;
}

std::vector<bool> Graph::needed_for(std::span<const NodeId> roots) const {
  std::vector<bool> needed(nodes_.size(), false);
  std::vector<NodeId> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    if (needed[id]) continue;
    needed[id] = true;
    for (const ValueRef input : node(id).inputs) stack.push_back(input.node);
    for (const NodeId control : node(id).control_inputs) stack.push_back(control);
  }
  return needed;
}

}  // namespace mirra::graph
