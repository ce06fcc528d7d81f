// recompute_scopes: copies of a scope's computations for the gradient nodes that read them, started
// by the gradients flowing into the scope.
#include "ops/recomputation.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

namespace mirra::ops {

namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::ValueRef;

// Whether copying `node` computes its values again: not a source of state or input, not an update,
// not a collective.
bool copyable(const Node& node, const graph::OpRegistry& registry) {
  static const std::set<std::string, std::less<>> kSources = {"Variable", "Placeholder", "Const", "Fill", "NoOp"};
  if (kSources.contains(node.op)) return false;
  const graph::OpSchema* schema = registry.find(node.op);
  return schema != nullptr && schema->updates.empty() && !schema->has(graph::kCollective);
}

// Copies for the gradient nodes of one scope; returns how many nodes were copied.
// The gradient nodes are [first_gradient, end_of_gradients): not the copies of scopes done before.
size_t recompute_scope(graph::Builder& b, const std::string& prefix, NodeId first_gradient, NodeId end_of_gradients) {
  Graph& g = b.graph();
  const size_t original_size = g.size();
  const auto is_gradient_node = [&](const Node& node) { return node.id >= first_gradient && node.id < end_of_gradients; };
  std::vector<bool> in_scope(original_size, false);
  for (const Node& node : g.nodes()) {
    in_scope[node.id] = !is_gradient_node(node) && node.name.starts_with(prefix) && copyable(node, b.registry());
  }
  // A value the forward pass reads outside the scope (the scope's output: the next block's input) is
  // kept, as a checkpoint; the gradient nodes read the copies of the others.
  std::vector<bool> kept(original_size, false);
  for (const Node& node : g.nodes()) {
    if (is_gradient_node(node) || in_scope[node.id]) continue;
    for (const ValueRef& input : node.inputs) {
      if (input.valid() && in_scope[input.node]) kept[input.node] = true;
    }
  }
  const auto recomputed = [&](const ValueRef& input) { return input.valid() && in_scope[input.node] && !kept[input.node]; };
  // The gradient nodes that read the scope's values, and the scope's nodes those values need.
  std::vector<NodeId> readers;
  std::vector<bool> needed(original_size, false);
  for (const Node& node : g.nodes()) {
    if (!is_gradient_node(node)) continue;
    bool reads = false;
    for (const ValueRef& input : node.inputs) reads = reads || recomputed(input);
    if (!reads) continue;
    readers.push_back(node.id);
    for (const ValueRef& input : node.inputs) {
      if (recomputed(input)) needed[input.node] = true;
    }
  }
  if (readers.empty()) return 0;
  for (NodeId id = static_cast<NodeId>(original_size); id-- > 0;) {  // inputs come before their readers
    if (!needed[id]) continue;
    for (const ValueRef& input : g.node(id).inputs) {
      if (recomputed(input)) needed[input.node] = true;
    }
  }
  // The copies, in the originals' order, each reading the copies of its inputs from the scope.
  std::map<NodeId, NodeId> copy_of;
  std::vector<NodeId> roots;
  auto scope = b.scope("recompute");
  for (NodeId id = 0; id < original_size; ++id) {
    if (!needed[id]) continue;
    const Node original = g.node(id);
    std::vector<ValueRef> inputs = original.inputs;
    bool reads_a_copy = false;
    for (ValueRef& input : inputs) {
      if (const auto found = input.valid() ? copy_of.find(input.node) : copy_of.end(); found != copy_of.end()) {
        input.node = found->second;
        reads_a_copy = true;
      }
    }
    const NodeId copy = b.add({.op = original.op, .inputs = inputs, .attrs = original.attrs, .name = original.name});
    if (copy == graph::kInvalidNode) return 0;
    copy_of[id] = copy;
    if (!reads_a_copy) roots.push_back(copy);
  }
  for (const NodeId reader : readers) {
    for (ValueRef& input : g.mutable_node(reader).inputs) {
      if (recomputed(input)) input.node = copy_of.at(input.node);
    }
  }
  // What follows the copies, to keep the triggers out of it (an edge from there would close a cycle).
  const std::vector<std::vector<NodeId>> consumers = g.consumers();
  std::vector<bool> after_copies(g.size(), false);
  std::deque<NodeId> queue;
  for (const auto& [original, copy] : copy_of) {
    after_copies[copy] = true;
    queue.push_back(copy);
  }
  while (!queue.empty()) {
    const NodeId id = queue.front();
    queue.pop_front();
    for (const NodeId consumer : consumers[id]) {
      if (!after_copies[consumer]) {
        after_copies[consumer] = true;
        queue.push_back(consumer);
      }
    }
  }
  // The gradients flowing into the scope: the readers' gradient inputs from outside what the copies start.
  std::set<NodeId> triggers;
  for (const NodeId reader : readers) {
    for (const ValueRef& input : g.node(reader).inputs) {
      if (input.valid() && !after_copies[input.node] && is_gradient_node(g.node(input.node))) triggers.insert(input.node);
    }
  }
  for (const NodeId trigger : triggers) {
    for (const NodeId root : roots) g.add_control_edge(trigger, root);
  }
  return copy_of.size();
}

}  // namespace

constexpr std::string_view kMarker = "recompute";

graph::Builder::ScopeGuard recompute_scope(graph::Builder& b, std::string_view name) {
  graph::Builder::ScopeGuard scope = b.scope(name);
  b.add({.op = "NoOp", .name = std::string(kMarker)});
  return scope;
}

graph::Expected<Recompute> parse_recompute(std::string_view name) {
  if (name == "none") return Recompute::none;
  if (name == "blocks") return Recompute::blocks;
  if (name == "all") return Recompute::all;
  return graph::invalid_argument("recompute must be none, blocks or all, not '" + std::string(name) + "'");
}

std::string_view recompute_name(Recompute mode) {
  switch (mode) {
    case Recompute::blocks: return "blocks";
    case Recompute::all: return "all";
    default: return "none";
  }
}

namespace {

// Whether a scope component is "block" followed by digits.
bool is_block(std::string_view part) {
  return part.size() > 5 && part.starts_with("block") && std::all_of(part.begin() + 5, part.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The scope a marker NoOp ("<prefix>recompute", or "<prefix>recompute_<k>" for a scope marked again)
// marks, or empty.
std::string marked_scope(const Node& node) {
  if (node.op != "NoOp") return {};
  const size_t slash = node.name.rfind('/');
  if (slash == std::string::npos) return {};
  const std::string_view last = std::string_view(node.name).substr(slash + 1);
  const bool marker = last == kMarker || (last.starts_with(std::string(kMarker) + "_") &&
                                          std::all_of(last.begin() + static_cast<std::ptrdiff_t>(kMarker.size()) + 1, last.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; }));
  return marker ? node.name.substr(0, slash + 1) : std::string();
}

}  // namespace

std::vector<std::string> recompute_scopes_of(const graph::Graph& g, Recompute mode) {
  std::set<std::string> scopes, parents;  // parents: the scopes that hold blocks
  for (const Node& node : g.nodes()) {
    if (std::string marked = marked_scope(node); !marked.empty()) scopes.insert(std::move(marked));
    if (mode == Recompute::none) continue;
    // Each scope component "block" followed by digits ends a block's prefix.
    size_t start = 0;
    while (start < node.name.size()) {
      const size_t slash = node.name.find('/', start);
      if (slash == std::string::npos) break;
      if (is_block(std::string_view(node.name).substr(start, slash - start))) {
        scopes.insert(node.name.substr(0, slash + 1));
        parents.insert(node.name.substr(0, start));
      }
      start = slash + 1;
    }
  }
  if (mode == Recompute::all) {
    // Every scope directly inside a scope that holds blocks.
    for (const Node& node : g.nodes()) {
      for (const std::string& parent : parents) {
        if (!node.name.starts_with(parent)) continue;
        const size_t slash = node.name.find('/', parent.size());
        if (slash != std::string::npos) scopes.insert(node.name.substr(0, slash + 1));
      }
    }
  }
  return {scopes.begin(), scopes.end()};
}

graph::Expected<size_t> recompute_scopes(graph::Builder& b, std::span<const std::string> scopes, NodeId first_gradient) {
  size_t copied = 0;
  const auto end_of_gradients = static_cast<NodeId>(b.graph().size());
  for (const std::string& prefix : scopes) {
    copied += recompute_scope(b, prefix, first_gradient, end_of_gradients);
    MIRRA_RETURN_IF_ERROR(b.status());
  }
  return copied;
}

}  // namespace mirra::ops
