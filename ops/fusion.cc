// The fusion passes: pattern match on single-consumer chains, then one node replaces the chain, taking
// over its data and control edges; or one node takes on the work of a reader of its output.
#include "ops/fusion.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/registry.h"

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

// Every (node, input slot) that reads each value.
using Readers = std::map<ValueRef, std::vector<std::pair<NodeId, size_t>>>;

Readers value_readers(const graph::Graph& g) {
  Readers readers;
  for (const Node& node : g.nodes()) {
    for (size_t i = 0; i < node.inputs.size(); ++i) readers[node.inputs[i]].emplace_back(node.id, i);
  }
  return readers;
}

const std::vector<std::pair<NodeId, size_t>>& readers_of(const Readers& readers, ValueRef value) {
  static const std::vector<std::pair<NodeId, size_t>> none;
  const auto found = readers.find(value);
  return found == readers.end() ? none : found->second;
}

// Whether a reader takes only its input's shape there (OpSchema::reads_only_shape: SumToShape's
// `like`), so that any value of that shape may stand in.
bool reads_only_shape(const graph::Graph& g, NodeId reader, size_t slot) {
  const graph::OpSchema* schema = registry().find(g.node(reader).op);
  return schema != nullptr && schema->reads_only_shape_of(slot);
}

// Whether `value`'s buffer is read by `reader` and by no other node (others may take its shape).
bool read_only_by(const graph::Graph& g, const Readers& readers, ValueRef value, NodeId reader) {
  bool read = false;
  for (const auto& [node, slot] : readers_of(readers, value)) {
    if (node == reader) {
      read = true;
    } else if (!reads_only_shape(g, node, slot)) {
      return false;
    }
  }
  return read;
}

// Control edges to or from the nodes `replaced` move to `into`.
void take_over_control_edges(graph::Graph& g, NodeId into, const std::set<NodeId>& replaced) {
  std::vector<NodeId> inherited;
  for (const NodeId id : replaced) {
    for (NodeId control : g.node(id).control_inputs) inherited.push_back(control);
  }
  std::vector<NodeId>& own = g.mutable_node(into).control_inputs;
  own.insert(own.end(), inherited.begin(), inherited.end());
  for (NodeId id = 0; id < g.size(); ++id) {
    std::vector<NodeId>& controls = g.mutable_node(id).control_inputs;
    bool changed = id == into;
    for (NodeId& control : controls) {
      if (replaced.count(control) == 0) continue;
      control = into;
      changed = true;
    }
    if (!changed) continue;
    std::sort(controls.begin(), controls.end());
    controls.erase(std::unique(controls.begin(), controls.end()), controls.end());
    if (id == into) controls.erase(std::remove(controls.begin(), controls.end(), into), controls.end());
  }
}

// Adds `fused`, which computes what output 0 of `last` did, in place of the chain `replaced` (last
// included): readers of that output read the fused node's, control edges to or from the chain move to
// the fused node, and the chain is left without readers. Returns the fused node.
NodeId replace_chain(graph::Graph& g, Node fused, const std::set<NodeId>& replaced, NodeId last) {
  const NodeId fused_id = g.add_node(std::move(fused));
  g.replace_all_uses({last, 0}, {fused_id, 0});
  take_over_control_edges(g, fused_id, replaced);
  return fused_id;
}

}  // namespace

namespace {

// Whether `slice` cuts the zeros `paddings` added around a value of type `unpadded` back off: Pad's
// gradient.
bool cuts_padding(const Node& slice, const std::vector<int64_t>& paddings, const graph::TensorType& unpadded) {
  if (slice.op != "Slice") return false;
  const auto& begin = *slice.attrs.get<std::vector<int64_t>>("begin");
  const auto& size = *slice.attrs.get<std::vector<int64_t>>("size");
  if (begin.size() * 2 != paddings.size() || size.size() != begin.size()) return false;
  for (size_t d = 0; d < begin.size(); ++d) {
    if (begin[d] != paddings[2 * d] || size[d] != unpadded.shape.dim(static_cast<int>(d))) return false;
  }
  return true;
}

// Whether `paddings` (of a Pad in `format`) are narrower than `conv`'s dilated window along the height
// and width, as EXPLICIT padding must be.
bool padding_fits_window(const graph::Graph& g, const Node& conv, const std::vector<int64_t>& paddings,
                         const std::string& format) {
  const graph::Shape& filter = g.type(conv.inputs[1]).shape;
  if (!filter.is_fully_defined()) return false;
  const auto& dilations = *conv.attrs.get<std::vector<int64_t>>("dilations");
  const size_t h = format == "NCHW" ? 2 : 1;
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t extent = (filter.dim(static_cast<int>(axis)) - 1) * dilations[axis] + 1;
    if (paddings[2 * (h + axis)] >= extent || paddings[2 * (h + axis) + 1] >= extent) return false;
  }
  return true;
}

}  // namespace

int fold_padding_into_convolutions(graph::Graph& g) {
  const Readers readers = value_readers(g);
  const size_t original = g.size();
  int folded = 0;
  for (NodeId pad_id = 0; pad_id < original; ++pad_id) {
    const Node pad = g.node(pad_id);
    if (pad.op != "Pad" || *pad.attrs.get<double>("constant_value") != 0.0) continue;
    const auto& paddings = *pad.attrs.get<std::vector<int64_t>>("paddings");
    if (paddings.size() != 8) continue;
    // Each reader's node, and the node whose output its explicitly padded copy replaces: itself, or
    // for the gradient of the padded value the Slice that cuts the padding off it.
    std::vector<std::pair<NodeId, NodeId>> rewrites;
    std::string format;
    bool foldable = true;
    for (const auto& [reader, slot] : readers_of(readers, {pad_id, 0})) {
      const Node& conv = g.node(reader);
      const bool convolution = conv.op == "Conv2D" || conv.op == "Conv2DBackpropFilter" || conv.op == "Conv2DBackpropInput";
      if (!convolution || slot != 0 || *conv.attrs.get<std::string>("padding") != "VALID" || conv.device != pad.device ||
          (!format.empty() && *conv.attrs.get<std::string>("data_format") != format)) {
        foldable = false;
        break;
      }
      format = *conv.attrs.get<std::string>("data_format");
      if (!padding_fits_window(g, conv, paddings, format)) {
        foldable = false;
        break;
      }
      NodeId replaced = reader;
      if (conv.op == "Conv2DBackpropInput") {
        const auto& gradient_readers = readers_of(readers, {reader, 0});
        if (gradient_readers.size() != 1 || gradient_readers[0].second != 0 ||
            !cuts_padding(g.node(gradient_readers[0].first), paddings, g.type(pad.inputs[0]))) {
          foldable = false;
          break;
        }
        replaced = gradient_readers[0].first;
      }
      rewrites.emplace_back(reader, replaced);
    }
    const size_t channel = format == "NCHW" ? 1 : 3;
    if (!foldable || rewrites.empty() || paddings[0] != 0 || paddings[1] != 0 || paddings[2 * channel] != 0 ||
        paddings[2 * channel + 1] != 0) {
      continue;
    }
    // The node whose output the folded convolution gives becomes it, in place, so that whoever holds
    // that output (the optimizer's list of gradients, which the strategies aggregate: a filter's
    // gradient) still finds it.
    for (const auto& [reader, replaced] : rewrites) {
      const Node conv = g.node(reader);
      Node& node = g.mutable_node(replaced);
      node.op = conv.op;
      node.inputs = conv.inputs;
      node.inputs[0] = pad.inputs[0];
      node.attrs = conv.attrs;
      node.attrs.set("padding", std::string("EXPLICIT"));
      node.attrs.set("explicit_paddings", paddings);
      node.device = conv.device;
      if (replaced != reader) take_over_control_edges(g, replaced, {reader});  // the input's gradient, of the unpadded value
    }
    ++folded;
  }
  return folded;
}

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

int fuse_batch_norm_activation(graph::Graph& g) {
  const Readers readers = value_readers(g);
  const size_t original = g.size();
  int fused = 0;
  for (NodeId relu_id = 0; relu_id < original; ++relu_id) {
    const Node relu = g.node(relu_id);
    if (relu.op != "Relu") continue;
    ValueRef normalised = relu.inputs[0], side_input;
    NodeId add_id = graph::kInvalidNode;
    const Node& sum = g.node(normalised.node);
    if (sum.op == "Add" && read_only_by(g, readers, normalised, relu_id) && sum.device == relu.device &&
        g.type(sum.inputs[0]) == g.type(sum.inputs[1]) && sum.inputs[0] != sum.inputs[1]) {
      // The batch normalisation is either term; the other is the side input.
      for (size_t k = 0; k < 2 && add_id == graph::kInvalidNode; ++k) {
        const ValueRef term = sum.inputs[k];
        if (g.node(term.node).op != "FusedBatchNormV3" || term.output != 0 || !read_only_by(g, readers, term, sum.id)) continue;
        normalised = term;
        side_input = sum.inputs[1 - k];
        add_id = sum.id;
      }
      if (add_id == graph::kInvalidNode) continue;
    } else if (!read_only_by(g, readers, normalised, relu_id)) {
      continue;
    }
    const Node& bn = g.node(normalised.node);
    if (bn.op != "FusedBatchNormV3" || normalised.output != 0 || bn.device != relu.device) continue;

    Node node;
    node.op = "FusedBatchNormEx";
    node.name = g.unique_name(relu.name + "/FusedBatchNormEx");
    node.inputs = bn.inputs;
    if (side_input.valid()) node.inputs.push_back(side_input);
    node.attrs = bn.attrs;
    node.attrs.set("activation", std::string("relu"));
    node.outputs = bn.outputs;
    node.outputs[0] = relu.outputs[0];
    node.device = bn.device;
    std::set<NodeId> chain = {bn.id, relu_id};
    if (add_id != graph::kInvalidNode) chain.insert(add_id);
    // Those that took the shape of the normalised value or of the sum take the ReLU's, which is theirs.
    std::vector<std::pair<NodeId, size_t>> shape_readers = readers_of(readers, normalised);
    if (add_id != graph::kInvalidNode) {
      const auto& of_sum = readers_of(readers, {add_id, 0});
      shape_readers.insert(shape_readers.end(), of_sum.begin(), of_sum.end());
    }
    const NodeId bn_id = bn.id;  // `bn` dangles once the graph grows
    const uint16_t outputs = static_cast<uint16_t>(bn.outputs.size());
    const NodeId fused_id = replace_chain(g, std::move(node), chain, relu_id);
    for (uint16_t output = 1; output < outputs; ++output) g.replace_all_uses({bn_id, output}, {fused_id, output});
    for (const auto& [reader, slot] : shape_readers) {
      if (chain.count(reader) == 0) g.mutable_node(reader).inputs[slot] = {fused_id, 0};
    }
    ++fused;
  }
  return fused;
}

int fuse_batch_norm_grad_activation(graph::Graph& g) {
  const Readers readers = value_readers(g);
  const size_t original = g.size();
  int fused = 0;
  for (NodeId grad_id = 0; grad_id < original; ++grad_id) {
    const Node grad = g.node(grad_id);
    if (grad.op != "FusedBatchNormGradV3") continue;
    // dy, or a SumToShape of it to a value of its own type (the gradient of a residual sum's term).
    ValueRef dy = grad.inputs[0];
    NodeId sum_id = graph::kInvalidNode;
    if (const Node& sum = g.node(dy.node); sum.op == "SumToShape") {
      if (g.type(sum.inputs[0]) != g.type(sum.inputs[1]) || !read_only_by(g, readers, dy, grad_id)) continue;
      sum_id = sum.id;
      dy = sum.inputs[0];
    }
    const Node& relu_grad = g.node(dy.node);
    if (relu_grad.op != "ReluGrad" || relu_grad.device != grad.device || g.type(dy) != g.type(grad.inputs[1])) continue;
    // Whoever else read the ReLU's gradient (the side input's path) reads output 5.
    std::vector<std::pair<NodeId, size_t>> others;
    for (const auto& reader : readers_of(readers, dy)) {
      if (reader.first != grad_id && reader.first != sum_id) others.push_back(reader);
    }

    // The gradient node becomes the fused one, so that whoever holds its outputs (the optimizer's
    // list of gradients, which the strategies aggregate) still finds them.
    const std::set<NodeId> absorbed = sum_id == graph::kInvalidNode ? std::set<NodeId>{relu_grad.id}
                                                                    : std::set<NodeId>{relu_grad.id, sum_id};
    const graph::TensorType side_input_gradient =
        others.empty() ? graph::TensorType{g.type(dy).dtype, graph::Shape{0}} : g.type(dy);
    const ValueRef upstream = relu_grad.inputs[0], activated = relu_grad.inputs[1];
    Node& node = g.mutable_node(grad_id);
    node.op = "FusedBatchNormGradEx";
    node.inputs[0] = upstream;
    node.inputs.push_back(activated);
    node.attrs.set("activation", std::string("relu"));
    node.attrs.set("side_input_backprop", !others.empty());
    node.outputs.push_back(side_input_gradient);
    take_over_control_edges(g, grad_id, absorbed);
    for (const auto& [reader, slot] : others) g.mutable_node(reader).inputs[slot] = {grad_id, 5};
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
  // One pass after another, in this order (the operands of a sum are evaluated in no fixed order).
  int fused = fold_padding_into_convolutions(g);
  fused += fuse_conv_bias_relu(g);
  fused += fuse_batch_norm_activation(g);
  fused += fuse_max_pool_grad_relu_grad(g);
  fused += fuse_batch_norm_grad_activation(g);
  fused += fuse_max_pool_grad_bias_grad(g);
  return fused;
}

}  // namespace mirra::ops
