// apply_mixed_precision: Casts in front of the products' operands, shared per value.
#include "ops/mixed_precision.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "ops/cpu/widened_16_bit.h"
#include "runtime/device_kinds.h"

namespace mirra::ops {

using graph::DType;
using graph::Node;
using graph::NodeId;
using graph::ValueRef;

namespace {

// A filter gradient over fewer than 8 input channels (a CNN's first layer) runs slower in oneDNN's
// bf16 than in f32, and its dy would be cast for it alone: it stays f32.
constexpr int64_t kFewestChannelsForFilterGradient = 8;
// `channel_multiple`: what the devices' 16-bit convolutions need their channel counts to be multiples
// of (DeviceKindSpec::sixteen_bit_channel_multiple: a GPU's tensor cores take multiples of 8, and may
// have no algorithm at all for others).
bool worth_16_bits(const graph::Graph& g, const Node& node, const graph::OpSchema& schema, int64_t channel_multiple) {
  if (!schema.filter_input) return true;
  const graph::Shape& filter = g.type(node.inputs[*schema.filter_input]).shape;
  const int64_t in = filter.dim(2), out = filter.dim(3);
  if (in % channel_multiple != 0 || out % channel_multiple != 0) return false;
  return node.op != "Conv2DBackpropFilter" || in >= kFewestChannelsForFilterGradient;
}

}  // namespace

graph::Expected<MixedPrecision> parse_mixed_precision(std::string_view name) {
  if (name == "off") return MixedPrecision::off;
  if (name == "bf16") return MixedPrecision::bf16;
  if (name == "fp16") return MixedPrecision::fp16;
  return graph::invalid_argument("mixed precision '" + std::string(name) + "' is not known (off, bf16, fp16)");
}

std::string_view mixed_precision_name(MixedPrecision mode) {
  switch (mode) {
    case MixedPrecision::off: return "off";
    case MixedPrecision::bf16: return "bf16";
    case MixedPrecision::fp16: return "fp16";
  }
  return "?";
}

int apply_mixed_precision(graph::Graph& g, const graph::OpRegistry& schemas, MixedPrecision mode,
                          const std::vector<graph::DeviceId>& devices) {
  if (mode == MixedPrecision::off) return 0;
  int64_t channel_multiple = 1;
  for (const graph::DeviceId& device : devices) {
    channel_multiple = std::lcm(channel_multiple, runtime::device_kind_spec(device.kind).sixteen_bit_channel_multiple);
  }
  const DType low = mode == MixedPrecision::bf16 ? DType::bf16 : DType::f16;
  const std::string suffix = mode == MixedPrecision::bf16 ? "/to_bf16" : "/to_f16";
  std::map<ValueRef, ValueRef> casts;  // f32 value -> its 16-bit copy
  const auto cast_of = [&](ValueRef value, const Node& consumer) {
    if (auto it = casts.find(value); it != casts.end()) return it->second;
    const Node& producer = g.node(value.node);
    Node cast;
    cast.op = "Cast";
    cast.name = g.unique_name(producer.name + (value.output == 0 ? "" : ":" + std::to_string(value.output)) + suffix);
    cast.inputs = {value};
    cast.attrs.set("dtype", low);
    cast.outputs = {{low, g.type(value).shape}};
    cast.device = consumer.device;
    const ValueRef copy{g.add_node(std::move(cast)), 0};
    casts.emplace(value, copy);
    return copy;
  };
  const size_t original = g.size();
  int rewritten = 0;
  for (NodeId id = 0; id < original; ++id) {
    const Node& node = g.node(id);
    // How many of its leading inputs are a product's operands (FusedConv2D's bias is not).
    const graph::OpSchema* schema = schemas.find(node.op);
    const size_t operands = schema != nullptr ? schema->product_operands : 0;
    if (operands == 0 || g.type(node.inputs[0]).dtype != DType::f32) continue;
    if (!worth_16_bits(g, node, *schema, channel_multiple)) continue;
    std::vector<ValueRef> inputs = node.inputs;
    for (size_t i = 0; i < operands; ++i) inputs[i] = cast_of(inputs[i], g.node(id));
    Node& rewrite = g.mutable_node(id);
    rewrite.inputs = std::move(inputs);
    rewrite.attrs.set("f32_output", true);
    ++rewritten;
  }
  return rewritten;
}

bool cpu_has_bf16_kernels() { return cpu::has_bf16_kernels(); }

}  // namespace mirra::ops
