// Mixed precision: a pass over a finished training graph (forward, gradients and updates), like
// TensorFlow's auto mixed precision rewrite, that runs its matrix products and convolutions on 16-bit
// operands and leaves everything else in f32.
//
// Each product (an op whose schema declares product_operands: MatMul, Conv2D, FusedConv2D,
// Conv2DBackpropInput and Conv2DBackpropFilter) on f32 operands gets Casts of its operands to the
// 16-bit type (one Cast per value, shared by every product that reads
// it: a layer's weights serve its forward product and its input gradient) and f32_output, so its
// result is the f32 sum of the 16-bit products; but a filter gradient over fewer than 8 input
// channels stays f32 (slower in bf16), and so does every convolution whose channel counts are not
// multiples of what the training devices' kinds ask (DeviceKindSpec::sixteen_bit_channel_multiple:
// 8 on GPUs, whose tensor cores take no others; one input channel may have no 16-bit algorithm). Variables, optimizer slots and updates (f32 master weights),
// biases, activations between the products, softmax, the loss and every reduction stay f32.
//
// REQUIRES: a structurally valid graph. ENSURES: every value keeps its dtype and meaning (rounded
// operands aside); returns how many products it rewrote.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/status.h"

namespace mirra::ops {

enum class MixedPrecision { off, bf16, fp16 };

// "off", "bf16" or "fp16"; anything else is an error naming the choices.
graph::Expected<MixedPrecision> parse_mixed_precision(std::string_view name);
std::string_view mixed_precision_name(MixedPrecision mode);

// `devices`: where the graph will train.
int apply_mixed_precision(graph::Graph& graph, const graph::OpRegistry& schemas, MixedPrecision mode,
                          const std::vector<graph::DeviceId>& devices = {});

// True when this CPU multiplies bf16 on oneDNN's bf16 kernels (CPUs with AVX-512; AMX and AVX-512 BF16
// where present). Elsewhere bf16 products on the CPU are computed in f32 on the bf16 operands and
// rounded once: bf16's numerics, at f32's speed less the casts.
bool cpu_has_bf16_kernels();

}  // namespace mirra::ops
