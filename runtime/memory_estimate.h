// What a graph will ask of memory before anything is allocated: every source (variable, constant,
// input) held for the whole step, and each other value from its producer to its last consumer, walked
// in topological order with unknown dims at the batch size. Callers check it against the limit before
// they create a session, so a model file cannot make a run allocate more than the machine has; the
// session's MemoryBudget then holds the same limit for what the estimate cannot see (a dim padded by
// an amount only known at run time).
//
//   auto estimate = runtime::estimate_memory(graph, /*batch_size=*/128);
//   MIRRA_RETURN_IF_ERROR(runtime::check_memory_budget(*estimate, runtime::default_memory_limit()));
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/memory_budget.h"

namespace mirra::runtime {

struct TensorEstimate {
  std::string node;
  graph::TensorType type;  // unknown dims as in the graph
  int64_t bytes = 0;       // at the batch size
};

struct MemoryEstimate {
  int64_t peak_bytes = 0;     // sources plus the most values alive at once; saturates at INT64_MAX
  int64_t source_bytes = 0;   // variables, constants and inputs
  std::vector<TensorEstimate> largest;  // the biggest values, largest first (at most five)
};

// Over the nodes `roots` need (every node when there are none), which are all a step that runs them
// allocates. Errors: a cyclic graph.
graph::Expected<MemoryEstimate> estimate_memory(const graph::Graph& graph, int64_t batch_size,
                                                std::span<const graph::NodeId> roots = {});
// resource_exhausted naming the estimate, the limit and the largest tensors when over `limit_bytes`.
graph::Status check_memory_budget(const MemoryEstimate& estimate, int64_t limit_bytes);
// Nine tenths of the machine's physical memory.
int64_t default_memory_limit();

}  // namespace mirra::runtime
