// keep_activations_16_bit: which 16-bit results every live reader would round anyway, then the rewrite.
#include "ops/sixteen_bit_activations.h"

#include <map>
#include <set>

namespace mirra::ops {

using graph::DType;
using graph::Node;
using graph::NodeId;
using graph::ValueRef;

namespace {

bool is_cast_to_bf16(const Node& node) {
  const DType* dtype = node.attrs.get<DType>("dtype");
  return node.op == "Cast" && dtype != nullptr && *dtype == DType::bf16;
}

// Readers that take a value as bf16 and no further: a Cast to bf16 (the same result), a pooling
// gradient comparing its input (as the pooling of those bf16 values did), a ReshapeLike taking a shape.
bool takes_as_bf16(const Node& reader, size_t slot) {
  return is_cast_to_bf16(reader) || (reader.op == "MaxPoolGrad" && slot == 0) ||
         (reader.op == "ReshapeLike" && slot == 1);
}

// Readers whose output 0 is the value at `slot` picked or rearranged, exact in its dtype: MaxPool,
// Reshape, ReshapeLike and Identity of input 0, and a max pooling gradient's dx from its dy.
bool passes_on(const Node& reader, size_t slot) {
  const bool carries =
      reader.op == "MaxPool" || reader.op == "Reshape" || reader.op == "ReshapeLike" || reader.op == "Identity";
  return (carries && slot == 0) || (reader.op == "MaxPoolGrad" && slot == 1);
}

class Rewrite {
 public:
  Rewrite(graph::Graph& g, const std::vector<NodeId>& fetched) : g_(g), fetched_(fetched.begin(), fetched.end()) {
    const std::vector<bool> live = g_.needed_for(fetched);
    for (NodeId id = 0; id < g_.size(); ++id) {
      if (!live[id]) continue;
      const Node& node = g_.node(id);
      for (size_t slot = 0; slot < node.inputs.size(); ++slot) readers_[node.inputs[slot]].push_back({id, slot});
    }
    // The products apply_mixed_precision gave bf16 operands: only products have f32_output.
    for (NodeId id = 0; id < g_.size(); ++id) {
      if (!live[id]) continue;
      const Node& node = g_.node(id);
      const bool* f32_output = node.attrs.get<bool>("f32_output");
      if (f32_output != nullptr && *f32_output && g_.type(node.inputs[0]).dtype == DType::bf16) products_.push_back(id);
    }
  }

  int run() {
    int narrowed = 0;
    for (NodeId id : products_) {
      if (!rounded_by_every_reader({id, 0})) continue;
      g_.mutable_node(id).attrs.set("f32_output", false);
      narrow({id, 0});
      ++narrowed;
    }
    return narrowed;
  }

 private:
  struct Reader {
    NodeId node;
    size_t slot;
  };

  // True when `value` is not fetched, has readers, and each takes it as bf16 (takes_as_bf16) or
  // passes it on into an output for which this holds in turn.
  bool rounded_by_every_reader(ValueRef value) {
    if (const auto known = verdicts_.find(value); known != verdicts_.end()) return known->second;
    const auto readers = readers_.find(value);
    bool rounded = readers != readers_.end() && fetched_.count(value.node) == 0;
    for (size_t i = 0; rounded && i < readers->second.size(); ++i) {
      const auto [id, slot] = readers->second[i];
      const Node& reader = g_.node(id);
      rounded = takes_as_bf16(reader, slot) || (passes_on(reader, slot) && rounded_by_every_reader({id, 0}));
    }
    verdicts_[value] = rounded;
    return rounded;
  }

  // `value` is now bf16: the nodes carrying it on write bf16 too, and its Casts' readers read it.
  void narrow(ValueRef value) {
    g_.mutable_node(value.node).outputs[value.output].dtype = DType::bf16;
    for (const auto [id, slot] : readers_[value]) {
      const Node& reader = g_.node(id);
      if (is_cast_to_bf16(reader)) {
        g_.replace_all_uses({id, 0}, value);
      } else if (passes_on(reader, slot)) {
        narrow({id, 0});
      }
    }
  }

  graph::Graph& g_;
  const std::set<NodeId> fetched_;
  std::map<ValueRef, std::vector<Reader>> readers_;  // by the live nodes only
  std::map<ValueRef, bool> verdicts_;
  std::vector<NodeId> products_;
};

}  // namespace

int keep_activations_16_bit(graph::Graph& graph, const std::vector<NodeId>& fetched) {
  return Rewrite(graph, fetched).run();
}

bool activations_stay_16_bit(MixedPrecision mode, const std::vector<graph::DeviceId>& devices) {
  if (mode != MixedPrecision::bf16 || !cpu_has_bf16_kernels() || devices.empty()) return false;
  for (const graph::DeviceId& device : devices) {
    if (device.kind != graph::DeviceKind::cpu) return false;
  }
  return true;
}

int keep_activations_16_bit_where_it_pays(graph::Graph& graph, MixedPrecision mode,
                                          const std::vector<graph::DeviceId>& devices,
                                          const std::vector<NodeId>& fetched) {
  return activations_stay_16_bit(mode, devices) ? keep_activations_16_bit(graph, fetched) : 0;
}

}  // namespace mirra::ops
