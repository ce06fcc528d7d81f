// What a graph will ask of memory before anything is allocated: every source (variable, constant,
// input) held for the whole step, and each other value from its producer to its last consumer, walked
// in topological order with the placeholders' unknown dims bound (the batch, and others by name) and,
// given the graph's schemas, every shape inferred again from them; a dim still unknown is taken as the
// batch size. Callers check it against the limit before
// they create a session, so a model file cannot make a run allocate more than the machine has; the
// session's MemoryBudget then holds the same limit for what the estimate cannot see (a dim padded by
// an amount only known at run time).
//
//   auto estimate = runtime::estimate_memory(graph, {.batch_size = 128, .dims = {{"tokens:1", 1024}},
//                                                    .schemas = &ops::registry()});
//   MIRRA_RETURN_IF_ERROR(runtime::check_memory_budget(*estimate, runtime::default_memory_limit()));
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "runtime/memory_budget.h"

namespace mirra::runtime {

// What the placeholders' unknown dims are at run time.
struct DimBindings {
  int64_t batch_size = 1;  // every placeholder's unknown dim 0
  // Other unknown dims of placeholders by "<placeholder>:<axis>" ("tokens:1": a sequence length).
  std::map<std::string, int64_t> dims;
  // The schemas the graph was built with: given, every node's shape is inferred again from the bound
  // placeholders (a Reshape's -1 resolves, a [?, ?] batch of tokens weighs B x T and not B x B);
  // without, the graph's shapes are used as they are.
  const graph::OpRegistry* schemas = nullptr;
};

struct TensorEstimate {
  std::string node;
  graph::TensorType type;  // with the dims bound (those still unknown as the graph has them)
  int64_t bytes = 0;       // at the batch size
};

struct MemoryEstimate {
  int64_t peak_bytes = 0;     // sources plus the most values alive at once; saturates at INT64_MAX
  int64_t source_bytes = 0;   // variables, constants and inputs
  std::vector<TensorEstimate> largest;  // the biggest values, largest first (at most five)
};

// Each output's type with the placeholders' dims bound and, given schemas, inferred again through the
// nodes in `order` (a topological order; the types of nodes outside it stay empty; a node whose
// inference fails keeps the graph's types).
std::vector<std::vector<graph::TensorType>> bound_types(const graph::Graph& graph, const DimBindings& dims,
                                                        const std::vector<graph::NodeId>& order);

// Over the nodes `roots` need (every node when there are none), which are all a step that runs them
// allocates. Errors: a cyclic graph; a binding that names no placeholder's unknown dim.
graph::Expected<MemoryEstimate> estimate_memory(const graph::Graph& graph, const DimBindings& dims,
                                                std::span<const graph::NodeId> roots = {});
inline graph::Expected<MemoryEstimate> estimate_memory(const graph::Graph& graph, int64_t batch_size,
                                                       std::span<const graph::NodeId> roots = {}) {
  return estimate_memory(graph, DimBindings{.batch_size = batch_size}, roots);
}
// resource_exhausted naming the estimate, the limit and the largest tensors when over `limit_bytes`.
graph::Status check_memory_budget(const MemoryEstimate& estimate, int64_t limit_bytes);
// Nine tenths of the machine's physical memory.
int64_t default_memory_limit();

}  // namespace mirra::runtime
