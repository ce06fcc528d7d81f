// OneDeviceStrategy's rewrite: places every node of a graph on one device.
// REQUIRES: a structurally valid graph. ENSURES: every node has `device`; nothing else changes.
#pragma once

#include "graph/graph.h"

namespace mirra::strategies {

graph::Graph place_on_device(const graph::Graph& graph, graph::DeviceId device);

}  // namespace mirra::strategies
