// step_graph: the replicas' part of a training step as the simulation's StepGraph: the nodes a step
// needs that run on the replicas' devices, each kernel on its replica's device and timed by the
// roofline of its op's cost (graph::OpSchema::cost) on the cluster's device (the larger of its FLOPs
// over the rate of its operands' dtype and its bytes over the memory bandwidth, at the device's
// efficiencies, plus the kernel overhead), and one node per collective group (AllReduce,
// ReduceScatter, AllGather) standing for all its ranks wherever the plan put them, with the bytes of
// one rank's buffer: it starts once every rank's inputs are ready, so the slowest replica sets the
// pace. Values from other devices count as ready at the start. With measured costs (a real run's
// trace, simulate/measured_costs.h), a kernel the trace timed takes its measured time plus the
// executor's time per kernel instead of its roofline (each replica its own: replicas of a CPU run
// are not alike), and each device runs as many kernels at once as it did in that run.
//
//   const graph::DeviceId replicas[] = {gpu0, gpu1};
//   auto step = step_graph(program.graph, roots, {.batch_size = 64, .schemas = &ops::registry()},
//                          replicas, cluster.device);
#pragma once

#include <span>

#include "graph/device_id.h"
#include "graph/graph.h"
#include "runtime/memory_estimate.h"
#include "simulate/cluster.h"
#include "simulate/measured_costs.h"
#include "simulate/step_simulation.h"

namespace mirra::simulate {

// The roofline time of one kernel of `cost` whose products take `dtype` operands.
double kernel_seconds(const graph::OpCost& cost, graph::DType dtype, const DeviceSpec& device);

// REQUIRES: dims.schemas (the shapes are inferred again with the batch bound).
// Errors: a cyclic graph; dims that stay unknown once the batch is bound (naming the node).
graph::Expected<StepGraph> step_graph(const graph::Graph& graph, std::span<const graph::NodeId> roots,
                                      const runtime::DimBindings& dims, std::span<const graph::DeviceId> replicas,
                                      const DeviceSpec& device, const MeasuredCosts* measured = nullptr);

}  // namespace mirra::simulate
