// fuse_conv_bias_relu: pattern match on single-consumer chains, then rewire data and control edges.
#include "ops/fusion.h"

#include <algorithm>
#include <set>

namespace mirra::ops {

namespace {

using graph::Node;
using graph::NodeId;
using graph::ValueRef;

std::vector<int> data_consumer_counts(const graph::Graph& g) {
  std::vector<int> counts(g.size(), 0);
  for (const Node& node : g.nodes()) {
    std::set<NodeId> producers;
    for (ValueRef input : node.inputs) producers.insert(input.node);
    for (NodeId producer : producers) ++counts[producer];
  }
  return counts;
}

}  // namespace

int fuse_conv_bias_relu(graph::Graph& g) {
  const std::vector<int> consumers = data_consumer_counts(g);
  const size_t original = g.size();
  int fused = 0;
  for (NodeId relu_id = 0; relu_id < original; ++relu_id) {
    const Node relu = g.node(relu_id);
    if (relu.op != "Relu") continue;
    const Node& bias_add = g.node(relu.inputs[0].node);
    if (bias_add.op != "BiasAdd" || consumers[bias_add.id] != 1) continue;
    const Node& conv = g.node(bias_add.inputs[0].node);
    if (conv.op != "Conv2D" || consumers[conv.id] != 1) continue;
    if (*bias_add.attrs.get<std::string>("data_format") != *conv.attrs.get<std::string>("data_format")) continue;
    if (bias_add.device != conv.device || relu.device != conv.device) continue;

    Node node;
    node.op = "FusedConv2D";
    node.name = g.unique_name(relu.name + "/FusedConv2D");
    node.inputs = {conv.inputs[0], conv.inputs[1], bias_add.inputs[1]};
    node.attrs = conv.attrs;
    node.attrs.set("activation", std::string("relu"));
    node.outputs = relu.outputs;
    node.device = conv.device;
    const std::set<NodeId> replaced = {conv.id, bias_add.id, relu_id};
    for (const NodeId id : replaced) {
      for (NodeId control : g.node(id).control_inputs) {
        if (std::find(node.control_inputs.begin(), node.control_inputs.end(), control) == node.control_inputs.end()) {
          node.control_inputs.push_back(control);
        }
      }
    }
    const NodeId fused_id = g.add_node(std::move(node));
    g.replace_all_uses({relu_id, 0}, {fused_id, 0});
    for (NodeId id = 0; id < g.size(); ++id) {
      std::vector<NodeId>& controls = g.mutable_node(id).control_inputs;
      bool waits = false;
      for (NodeId& control : controls) {
        if (replaced.count(control) == 0) continue;
        control = fused_id;
        waits = true;
      }
      if (!waits) continue;
      std::sort(controls.begin(), controls.end());
      controls.erase(std::unique(controls.begin(), controls.end()), controls.end());
      if (id == fused_id) controls.erase(std::remove(controls.begin(), controls.end(), fused_id), controls.end());
    }
    ++fused;
  }
  return fused;
}

}  // namespace mirra::ops
