// Builder: adds nodes to a Graph, checking each against its op schema as it is added. Like a
// TensorFlow Scope, it keeps the first error: an op that fails (or that gets an invalid input from
// an earlier failure) returns an invalid ValueRef, and status() says what went wrong and where.
//
//   Graph g;
//   Builder b(g, ops::registry(), /*seed=*/42);
//   { auto scope = b.scope("fc1"); h = ops::relu(b, ops::matmul(b, x, w)); }  // "fc1/MatMul", "fc1/Relu"
//   if (!b.status().ok()) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace mirra::graph {

struct NodeSpec {
  std::string op;
  std::vector<ValueRef> inputs = {};
  AttrMap attrs = {};
  std::string name = {};  // defaults to the op name; scoped and made unique either way
  std::vector<NodeId> control_inputs = {};
};

class Builder {
 public:
  Builder(Graph& graph, const OpRegistry& registry, uint64_t seed = 0);

  // Adds the node and returns its id, or kInvalidNode after an error (see status()).
  NodeId add(NodeSpec spec);
  // add() for single-output ops: output 0 of the new node.
  ValueRef add_value(NodeSpec spec);

  const Status& status() const { return status_; }
  Graph& graph() { return graph_; }
  const OpRegistry& registry() const { return registry_; }
  const TensorType& type(ValueRef value) const { return graph_.type(value); }

  // Name scopes: nodes added while the guard lives get "name/" before their names.
  class ScopeGuard {
   public:
    explicit ScopeGuard(Builder& builder) : builder_(&builder) {}
    ScopeGuard(ScopeGuard&& other) noexcept : builder_(other.builder_) { other.builder_ = nullptr; }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;
    ScopeGuard& operator=(ScopeGuard&&) = delete;
    ~ScopeGuard() {
      if (builder_) builder_->scopes_.pop_back();
    }

   private:
    Builder* builder_;
  };
  [[nodiscard]] ScopeGuard scope(std::string_view name);
  // The scopes in force, joined: "fc1/inner" (empty outside any).
  std::string scope_path() const;

  // Device placement for nodes added from now on (none: the session's default device).
  void set_device(std::optional<DeviceId> device) { device_ = device; }

  // A fresh seed for a random initialiser, derived from the builder's seed and a counter, so the
  // same program with the same seed builds the same graph.
  uint64_t next_seed();

  // Records `status` as the builder's error if it has none yet (for helpers that fail before add).
  void fail(Status status);

 private:
  std::string scoped_name(std::string_view base);

  Graph& graph_;
  const OpRegistry& registry_;
  Status status_;
  std::vector<std::string> scopes_;
  std::optional<DeviceId> device_;
  uint64_t seed_;
  uint64_t seed_counter_ = 0;
};

}  // namespace mirra::graph
