// The fusion passes: pattern match on single-consumer chains, then one node replaces the chain, taking
// over its data and control edges; or one node takes on the work of a reader of its output.
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

// Adds `fused`, which computes what output 0 of `last` did, in place of the chain `replaced` (last
// included): readers of that output read the fused node's, control edges to or from the chain move to
// the fused node, and the chain is left without readers.
void replace_chain(graph::Graph& g, Node fused, const std::set<NodeId>& replaced, NodeId last) {
  for (const NodeId id : replaced) {
    for (NodeId control : g.node(id).control_inputs) {
      if (std::find(fused.control_inputs.begin(), fused.control_inputs.end(), control) == fused.control_inputs.end()) {
        fused.control_inputs.push_back(control);
      }
    }
  }
  const NodeId fused_id = g.add_node(std::move(fused));
  g.replace_all_uses({last, 0}, {fused_id, 0});
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
    replace_chain(g, std::move(node), {conv.id, bias_add.id, relu_id}, relu_id);
    ++fused;
  }
  return fused;
}

int fuse_max_pool_grad_relu_grad(graph::Graph& g) {
  const std::vector<int> consumers = data_consumer_counts(g);
  const size_t original = g.size();
  int fused = 0;
  for (NodeId relu_grad_id = 0; relu_grad_id < original; ++relu_grad_id) {
    const Node relu_grad = g.node(relu_grad_id);
    if (relu_grad.op != "ReluGrad") continue;
    const Node& pool_grad = g.node(relu_grad.inputs[0].node);
    if (pool_grad.op != "MaxPoolGrad" || consumers[pool_grad.id] != 1 || *pool_grad.attrs.get<bool>("through_relu")) continue;
    // The pooled value must be the very ReLU output whose gradient this is.
    if (pool_grad.inputs[0] != relu_grad.inputs[1] || pool_grad.device != relu_grad.device) continue;

    Node node = pool_grad;
    node.name = g.unique_name(relu_grad.name + "/MaxPoolGrad");
    node.control_inputs.clear();
    node.attrs.set("through_relu", true);
    node.outputs = relu_grad.outputs;
    replace_chain(g, std::move(node), {pool_grad.id, relu_grad_id}, relu_grad_id);
    ++fused;
  }
  return fused;
}

int fuse_max_pool_grad_bias_grad(graph::Graph& g) {
  int fused = 0;
  for (NodeId sum_id = 0; sum_id < g.size(); ++sum_id) {
    const Node& sum = g.node(sum_id);
    const bool* keep_dims = sum.attrs.get<bool>("keep_dims");
    const auto* axes = sum.attrs.get<std::vector<int64_t>>("axes");
    if (sum.op != "ReduceSum" || keep_dims == nullptr || *keep_dims || axes == nullptr) continue;
    const ValueRef summed = sum.inputs[0];
    const Node& pool_grad = g.node(summed.node);
    if (pool_grad.op != "MaxPoolGrad" || *pool_grad.attrs.get<bool>("channel_sums") || pool_grad.device != sum.device) continue;
    const bool nchw = *pool_grad.attrs.get<std::string>("data_format") == "NCHW";
    if (*axes != (nchw ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0, 1, 2})) continue;

    Node& fused_node = g.mutable_node(summed.node);
    fused_node.attrs.set("channel_sums", true);
    fused_node.outputs.push_back(g.type({sum_id, 0}));
    Node& forward = g.mutable_node(sum_id);
    forward.op = "Identity";
    forward.inputs = {{summed.node, 1}};
    forward.attrs = {};
    ++fused;
  }
  return fused;
}

int fuse_for_training(graph::Graph& g) {
  return fuse_conv_bias_relu(g) + fuse_max_pool_grad_relu_grad(g) + fuse_max_pool_grad_bias_grad(g);
}

}  // namespace mirra::ops
