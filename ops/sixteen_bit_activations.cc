// keep_activations_16_bit: which 16-bit results every live reader would round anyway, then the rewrite.
#include "ops/sixteen_bit_activations.h"

#include <map>
#include <set>

#include "runtime/device_kinds.h"

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

class Rewrite {
 public:
  Rewrite(graph::Graph& g, const graph::OpRegistry& schemas, const std::vector<NodeId>& fetched)
      : g_(g), schemas_(schemas), fetched_(fetched.begin(), fetched.end()) {
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

  // Readers that take a value as bf16 and no further: a Cast to bf16 (the same result), one that
  // reads only its shape, and a max pooling gradient comparing its input to find each window's
  // maximum, as the max pooling of those bf16 values did (the pair's own contract, so it is named).
  bool takes_as_bf16(const Node& reader, size_t slot) const {
    const graph::OpSchema* schema = schemas_.find(reader.op);
    return is_cast_to_bf16(reader) || (schema != nullptr && schema->reads_only_shape_of(slot)) ||
           (reader.op == "MaxPoolGrad" && slot == 0);
  }

  // Readers whose output 0 holds the value at `slot` unchanged (picked, rearranged or viewed: the
  // schema's moves_values), exact in its dtype; and a max pooling gradient's dx, which carries its
  // dy into each window's maximum (summed where windows overlap: the pair's contract again).
  bool passes_on(const Node& reader, size_t slot) const {
    const graph::OpSchema* schema = schemas_.find(reader.op);
    return (schema != nullptr && schema->moves_values_of(slot)) || (reader.op == "MaxPoolGrad" && slot == 1);
  }

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
  const graph::OpRegistry& schemas_;
  const std::set<NodeId> fetched_;
  std::map<ValueRef, std::vector<Reader>> readers_;  // by the live nodes only
  std::map<ValueRef, bool> verdicts_;
  std::vector<NodeId> products_;
};

}  // namespace

int keep_activations_16_bit(graph::Graph& graph, const graph::OpRegistry& schemas, const std::vector<NodeId>& fetched) {
  return Rewrite(graph, schemas, fetched).run();
}

bool activations_stay_16_bit(MixedPrecision mode, const std::vector<graph::DeviceId>& devices) {
  if (mode != MixedPrecision::bf16 || !cpu_has_bf16_kernels() || devices.empty()) return false;
  for (const graph::DeviceId& device : devices) {
    if (!runtime::device_kind_spec(device.kind).keeps_bf16_activations) return false;
  }
  return true;
}

int keep_activations_16_bit_where_it_pays(graph::Graph& graph, const graph::OpRegistry& schemas, MixedPrecision mode,
                                          const std::vector<graph::DeviceId>& devices,
                                          const std::vector<NodeId>& fetched) {
  return activations_stay_16_bit(mode, devices) ? keep_activations_16_bit(graph, schemas, fetched) : 0;
}

}  // namespace mirra::ops
