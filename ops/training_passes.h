// rewrite_for_training: the passes a training graph takes after minimize, in their order: fusion
// (fuse_for_training), mixed precision (apply_mixed_precision) and 16-bit activations where they pay
// (keep_activations_16_bit_where_it_pays); then every node that `fetched` need is checked against its
// op's schema in `schemas` (graph::verify_types; the registry the graph was built with), so a pass
// that left a node its kernels cannot take is an internal error naming that node before anything runs.
#pragma once

#include <vector>

#include "graph/device_id.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "ops/mixed_precision.h"

namespace mirra::ops {

// `devices`: where the strategy will place the program (whether 16-bit activations pay there).
graph::Status rewrite_for_training(graph::Graph& graph, const graph::OpRegistry& schemas, MixedPrecision mode,
                                   const std::vector<graph::DeviceId>& devices, const std::vector<graph::NodeId>& fetched);

}  // namespace mirra::ops
