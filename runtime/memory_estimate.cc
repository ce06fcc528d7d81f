// estimate_memory: a liveness walk over the topological order, summed in 128 bits so that no model
// file can make the estimate itself wrap.
#include "runtime/memory_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

namespace mirra::runtime {

namespace {

__extension__ typedef __int128 Wide;  // a GCC and clang extension: say so, for -Wpedantic
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

int64_t clamp_bytes(Wide bytes) { return bytes > kMaxBytes ? kMaxBytes : static_cast<int64_t>(bytes); }

// Whether every binding names an unknown dim of a placeholder ("<placeholder>:<axis>").
graph::Status check_bindings(const graph::Graph& graph, const DimBindings& dims) {
  for (const auto& [name, size] : dims.dims) {
    const size_t colon = name.rfind(':');
    const auto id = colon == std::string::npos ? std::nullopt : graph.find(name.substr(0, colon));
    bool unknown = false;
    if (id && graph.node(*id).op == "Placeholder") {
      const graph::Shape& shape = graph.node(*id).outputs[0].shape;
      for (int d = 0; d < shape.rank(); ++d) unknown = unknown || (shape.dim(d) < 0 && name.substr(colon + 1) == std::to_string(d));
    }
    if (!unknown) {
      return graph::invalid_argument("memory estimate: '" + name + "' names no unknown dim of a placeholder (<placeholder>:<axis>)");
    }
    if (size < 0) return graph::invalid_argument("memory estimate: '" + name + "' is bound to a negative size");
  }
  return graph::Status();
}

}  // namespace

std::vector<std::vector<graph::TensorType>> bound_types(const graph::Graph& graph, const DimBindings& dims,
                                                        const std::vector<graph::NodeId>& order) {
  std::vector<std::vector<graph::TensorType>> types(graph.size());
  for (const graph::NodeId id : order) {
    const graph::Node& node = graph.node(id);
    types[id].assign(node.outputs.begin(), node.outputs.end());
    if (node.op == "Placeholder") {
      std::vector<int64_t>& shape = types[id][0].shape.dims;
      for (size_t d = 0; d < shape.size(); ++d) {
        const auto bound = dims.dims.find(node.name + ":" + std::to_string(d));
        if (shape[d] < 0 && bound != dims.dims.end()) shape[d] = bound->second;
        if (shape[d] < 0 && d == 0) shape[d] = dims.batch_size;
      }
      continue;
    }
    const graph::OpSchema* schema = dims.schemas != nullptr ? dims.schemas->find(node.op) : nullptr;
    if (schema == nullptr || node.inputs.empty()) continue;
    std::vector<graph::TensorType> inputs;
    for (const graph::ValueRef input : node.inputs) inputs.push_back(types[input.node][input.output]);
    graph::Node copy = node;
    if (auto inferred = graph::check_and_infer(*schema, copy, inputs); inferred.ok() && inferred->size() == node.outputs.size()) {
      types[id] = std::move(*inferred);
    }
  }
  return types;
}

graph::Expected<MemoryEstimate> estimate_memory(const graph::Graph& graph, const DimBindings& dims,
                                                std::span<const graph::NodeId> roots) {
  const int64_t batch_size = dims.batch_size;
  MIRRA_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph.topological_order());
  if (!roots.empty()) {
    const std::vector<bool> needed = graph.needed_for(roots);
    std::erase_if(order, [&](graph::NodeId id) { return !needed[id]; });
  }
  MIRRA_RETURN_IF_ERROR(check_bindings(graph, dims));
  const std::vector<std::vector<graph::TensorType>> types = bound_types(graph, dims, order);
  std::vector<size_t> position(graph.size()), last_use(graph.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = last_use[order[i]] = i;
  for (const graph::NodeId id : order) {
    const graph::Node& node = graph.node(id);
    for (const graph::ValueRef& input : node.inputs) {
      last_use[input.node] = std::max(last_use[input.node], position[node.id]);
    }
  }
  struct Value {
    int64_t bytes;
    graph::ValueRef ref;
  };
  std::vector<Value> values;
  std::vector<Wide> released_after(order.size(), 0);
  Wide sources = 0, live = 0, peak = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const graph::Node& node = graph.node(order[i]);
    Wide produced = 0;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int64_t bytes = types[node.id][k].byte_size_at(batch_size).value_or(kMaxBytes);
      produced += bytes;
      values.push_back({bytes, {node.id, static_cast<uint16_t>(k)}});
    }
    if (node.inputs.empty()) {
      sources += produced;  // variables, constants and fed inputs stay for the whole step
    } else {
      live += produced;
      released_after[last_use[node.id]] += produced;
    }
    peak = std::max(peak, live);
    live -= released_after[i];
  }
  MemoryEstimate estimate{.peak_bytes = clamp_bytes(sources + peak), .source_bytes = clamp_bytes(sources)};
  const size_t shown = std::min<size_t>(values.size(), 5);
  std::partial_sort(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(shown), values.end(),
                    [](const Value& a, const Value& b) { return a.bytes > b.bytes; });
  for (size_t i = 0; i < shown; ++i) {
    const graph::Node& node = graph.node(values[i].ref.node);
    estimate.largest.push_back({node.name, types[node.id][values[i].ref.output], values[i].bytes});
  }
  return estimate;
}

graph::Status check_memory_budget(const MemoryEstimate& estimate, int64_t limit_bytes) {
  if (estimate.peak_bytes <= limit_bytes) return graph::Status();
  std::string largest;
  for (const TensorEstimate& t : estimate.largest) {
    largest += (largest.empty() ? "" : ", ") + t.node + " " + t.type.to_string() + " " + format_bytes(t.bytes);
  }
  return graph::resource_exhausted("the model needs about " + format_bytes(estimate.peak_bytes) + " (" +
                                   format_bytes(estimate.source_bytes) + " of variables, constants and inputs), over the memory limit of " +
                                   format_bytes(limit_bytes) + "; largest tensors: " + largest);
}

int64_t default_memory_limit() {
  const auto pages = static_cast<Wide>(::sysconf(_SC_PHYS_PAGES));
  const auto page_size = static_cast<Wide>(::sysconf(_SC_PAGE_SIZE));
  return clamp_bytes(pages * page_size / 10 * 9);
}

}  // namespace mirra::runtime
