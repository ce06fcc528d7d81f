// What the collective ops' kernels (collective_ops.cc, and the GPU's) share: their attrs and the checks
// of them, the reductions they take, and the session's Communicator a node calls. Internal to ops/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "ops/collective_ops.h"
#include "ops/shape_inference.h"
#include "runtime/collectives/communicator.h"
#include "runtime/kernel.h"

namespace mirra::ops {

// The most ranks (or workers) a collective node spans.
inline constexpr int64_t kMaxReplicas = 4096;

// Every collective node names the Communicator it calls and how long its ranks may take to arrive.
inline const graph::AttrSpec kImplementationAttr{"implementation", graph::AttrType::string,
                                                 std::string(CollectiveOptions{}.implementation)};
inline const graph::AttrSpec kTimeoutAttr{"timeout_ms", graph::AttrType::integer, CollectiveOptions{}.timeout_ms};
inline const graph::AttrSpec kReductionAttr{"reduction", graph::AttrType::string, std::string("sum")};

Status check_collective_attrs(const InferContext& ctx);

// The collective the node's `implementation` attr names in this session.
Expected<runtime::Communicator*> node_communicator(const runtime::KernelContext& ctx);

// The node's `reduction` attr: "sum" or "mean".
runtime::Reduction reduction_of(const runtime::KernelContext& ctx);
Status check_reduction(const InferContext& ctx);

// What an all-reduce sums: f32, f64, or bf16 (summed in f32).
Status check_all_reducible(const InferContext& ctx, const TensorType& t);

// What a reduce-scatter cuts into shares: f32 or f64.
Status check_reduce_scatterable(const InferContext& ctx, const TensorType& t);

// Outputs 0..count-1 of node `id` (none valid when the builder failed to add it).
std::vector<graph::ValueRef> outputs_of(graph::NodeId id, size_t count);

}  // namespace mirra::ops
