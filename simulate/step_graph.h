// step_graph: one replica's part of a training step as the simulation's StepGraph: the nodes a step
// needs that run on the replica's device, in graph order, each kernel timed by the roofline of its
// op's cost (graph::OpSchema::cost) on the cluster's device (the larger of its FLOPs over the rate
// of its operands' dtype and its bytes over the memory bandwidth, at the device's efficiencies, plus
// the kernel overhead), and its collectives (AllReduce, ReduceScatter, AllGather ranks) with the bytes
// each brings, rank 0's of every group wherever the plan put it (state averaged on the host). Values
// from other devices (the batch split on the host) count as ready at the start.
//
//   auto step = step_graph(program.graph, roots, {.batch_size = 32, .schemas = &ops::registry()},
//                          replica_device, cluster.device);
#pragma once

#include <span>

#include "graph/device_id.h"
#include "graph/graph.h"
#include "runtime/memory_estimate.h"
#include "simulate/cluster.h"
#include "simulate/step_simulation.h"

namespace mirra::simulate {

// The roofline time of one kernel of `cost` whose products take `dtype` operands.
double kernel_seconds(const graph::OpCost& cost, graph::DType dtype, const DeviceSpec& device);

// REQUIRES: dims.schemas (the shapes are inferred again with the batch bound).
// Errors: a cyclic graph; dims that stay unknown once the batch is bound (naming the node).
graph::Expected<StepGraph> step_graph(const graph::Graph& graph, std::span<const graph::NodeId> roots,
                                      const runtime::DimBindings& dims, const graph::DeviceId& replica,
                                      const DeviceSpec& device);

}  // namespace mirra::simulate
