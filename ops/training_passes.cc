// rewrite_for_training: the training graph's passes in order, and the check of their result.
#include "ops/training_passes.h"

#include "graph/verify.h"
#include "ops/fusion.h"
#include "ops/sixteen_bit_activations.h"

namespace mirra::ops {

graph::Status rewrite_for_training(graph::Graph& graph, const graph::OpRegistry& schemas, MixedPrecision mode,
                                   const std::vector<graph::DeviceId>& devices, const std::vector<graph::NodeId>& fetched) {
  fuse_for_training(graph);
  apply_mixed_precision(graph, schemas, mode, devices);
  keep_activations_16_bit_where_it_pays(graph, schemas, mode, devices, fetched);
  if (const graph::Status valid = graph::verify_types(graph, schemas, fetched); !valid.ok()) {
    return graph::internal_error("the training graph's rewrites left an invalid node: " + valid.message());
  }
  return graph::Status();
}

}  // namespace mirra::ops
