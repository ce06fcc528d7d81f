// place_on_device.
#include "strategies/one_device.h"

namespace mirra::strategies {

graph::Graph place_on_device(const graph::Graph& graph, graph::DeviceId device) {
  graph::Graph placed = graph;
  for (graph::NodeId id = 0; id < placed.size(); ++id) placed.mutable_node(id).device = device;
  return placed;
}

}  // namespace mirra::strategies
