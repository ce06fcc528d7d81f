// 16-bit activations: a pass after apply_mixed_precision that keeps a product's 16-bit result where
// every reader would round it to 16 bits anyway, as TensorFlow's mixed precision does. The product
// then writes bf16 instead of its f32 sum (f32_output cleared), the pooling and reshapes between it
// and the next products carry bf16 (max pooling and reshaping are exact on it), a pooling gradient on
// a bf16 gradient writes bf16, and the Casts those readers had are bypassed. In the CNN this halves
// the bytes the pooling and its gradient move and drops three Casts per step.
//
// A value stays f32 if it is fetched or anything else reads it (a bias add, a ReLU gradient, softmax,
// an update, an f32 product); only the nodes needed for `fetched` count as readers.
//
// It pays where the products write 16 bits at no cost: on CPUs whose oneDNN multiplies bf16
// (activations_stay_16_bit). Products computed in f32 on 16-bit operands would round their results
// in a pass of their own instead.
//
// REQUIRES: apply_mixed_precision ran. ENSURES: every value keeps its meaning, some rounded to bf16
// earlier than before; returns how many products now write 16 bits.
#pragma once

#include <vector>

#include "graph/device_id.h"
#include "graph/graph.h"
#include "ops/mixed_precision.h"

namespace mirra::ops {

int keep_activations_16_bit(graph::Graph& graph, const graph::OpRegistry& schemas, const std::vector<graph::NodeId>& fetched);

// Whether keep_activations_16_bit pays for products in `mode` placed on `devices`: bf16, on a CPU that
// multiplies bf16 natively, with every device of a kind that keeps bf16 activations
// (DeviceKindSpec::keeps_bf16_activations: cpu).
bool activations_stay_16_bit(MixedPrecision mode, const std::vector<graph::DeviceId>& devices);

// keep_activations_16_bit where activations_stay_16_bit(mode, devices); else nothing (0).
int keep_activations_16_bit_where_it_pays(graph::Graph& graph, const graph::OpRegistry& schemas, MixedPrecision mode,
                                          const std::vector<graph::DeviceId>& devices,
                                          const std::vector<graph::NodeId>& fetched);

}  // namespace mirra::ops
