// Graph: the nodes of one computation, indexed by id and by unique name, with topological order.
// A Graph only stores; the Builder (builder.h) checks ops against their schemas as nodes are added,
// and verify_structure (verify.h) checks a graph that came from elsewhere.
//
//   Graph g;
//   Builder b(g, ops::registry());
//   auto y = ops::relu(b, ops::matmul(b, x, w));
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "graph/node.h"
#include "graph/status.h"

namespace mirra::graph {

class Graph {
 public:
  // Adds `node` (its id is assigned here). Its name must not be taken: see unique_name.
  NodeId add_node(Node node);

  size_t size() const { return nodes_.size(); }
  const Node& node(NodeId id) const;
  Node& mutable_node(NodeId id);
  std::span<const Node> nodes() const { return nodes_; }
  const TensorType& type(ValueRef value) const;

  std::optional<NodeId> find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name).has_value(); }
  // `base` if no node has that name, else a free "base_<k>" with k above every suffix handed out for
  // `base` so far (so naming n nodes alike costs O(n), not O(n^2)).
  std::string unique_name(std::string_view base);

  // `to` runs after `from`.
  void add_control_edge(NodeId from, NodeId to);
  // Every data input that reads `from` reads `to` instead.
  void replace_all_uses(ValueRef from, ValueRef to);
  // Keeps the nodes `keep` marks (by id), in their order, and removes the others. REQUIRES: the
  // inputs and control inputs of every kept node are kept. Returns each old id's new id
  // (kInvalidNode for a removed node); remap() moves a reference held elsewhere along.
  std::vector<NodeId> keep_only(const std::vector<bool>& keep);

  // Node ids so that every node comes after its data and control inputs; ties keep id order, so the
  // result is stable. An error names a node on a cycle.
  Expected<std::vector<NodeId>> topological_order() const;
  // By node id: whether `roots` depend on it through data and control inputs (the roots included).
  std::vector<bool> needed_for(std::span<const NodeId> roots) const;
  // By node id: the nodes that read it, through a data input (once per input) or a control input.
  std::vector<std::vector<NodeId>> consumers() const;

 private:
  std::vector<Node> nodes_;
  std::unordered_map<std::string, NodeId> by_name_;
  std::unordered_map<std::string, int> last_suffix_;  // by base name, for unique_name
};

// A node id, or a value, held outside a graph after Graph::keep_only returned `moved`: where it went,
// or kInvalidNode (an invalid value) when it was removed.
inline NodeId remap(NodeId id, const std::vector<NodeId>& moved) { return id < moved.size() ? moved[id] : kInvalidNode; }
inline ValueRef remap(ValueRef value, const std::vector<NodeId>& moved) {
  return value.valid() ? ValueRef{remap(value.node, moved), value.output} : value;
}

}  // namespace mirra::graph
