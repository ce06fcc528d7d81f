// batch_mean_of and rebuild_loss: a walk from the loss down the one path that depends on the batch.
#include "strategies/batch_mean_loss.h"

#include <algorithm>
#include <string>

namespace mirra::strategies {

namespace {

using graph::Node;
using graph::NodeId;
using graph::ValueRef;

constexpr const char* kSupported =
    "a loss is a mean over the batch (ReduceMean of every element of a value computed from the batch inputs), plus or "
    "minus terms that do not depend on them (Add, Sub), scaled by such terms at most (Mul, Div); a loss divided by a "
    "count computed from the batch (the tokens a mask keeps) is one when the signature declares that count as its "
    "loss_weight";

graph::Status unsupported(const Node& node, const std::string& why) {
  return graph::invalid_argument("replicate: the loss's node '" + node.name + "' (" + node.op + ") " + why + "; " +
                                 kSupported);
}

// Whether the ReduceMean `node` averages every element of its input into a scalar.
bool averages_everything(const graph::Graph& g, const Node& node) {
  if (node.outputs[0].shape.rank() != 0) return false;
  const int rank = g.type(node.inputs[0]).shape.rank();
  const auto* axes = node.attrs.get<std::vector<int64_t>>("axes");
  if (axes == nullptr) return true;
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t axis : *axes) {
    const int64_t d = axis < 0 ? axis + rank : axis;
    if (d >= 0 && d < rank) reduced[static_cast<size_t>(d)] = true;
  }
  return std::all_of(reduced.begin(), reduced.end(), [](bool r) { return r; });
}

// The input of `node` (a combining op) that leads to the batch mean, or an error when the node does
// not combine the mean with terms independent of the batch.
graph::Expected<ValueRef> toward_the_mean(const graph::OpRegistry& schemas, const Node& node,
                                          const std::vector<bool>& from_batch) {
  const auto depends = [&](size_t i) { return from_batch[node.inputs[i].node]; };
  const graph::OpSchema* schema = schemas.find(node.op);
  if (schema != nullptr && node.inputs.size() == 1 && schema->moves_values_of(0)) return node.inputs[0];
  if (node.op == "Add" || node.op == "Sub" || node.op == "Mul") {
    if (depends(0) && depends(1)) return unsupported(node, "combines two values that both depend on the batch");
    return node.inputs[depends(0) ? 0 : 1];
  }
  if (node.op == "Div") {
    if (depends(1)) return unsupported(node, "divides by a value that depends on the batch");
    return node.inputs[0];
  }
  return unsupported(node, "depends on the batch");
}

}  // namespace

graph::Expected<NodeId> batch_mean_of(const graph::Graph& g, const graph::OpRegistry& schemas, ValueRef loss,
                                      const std::vector<bool>& from_batch, ValueRef loss_weight) {
  if (!from_batch[loss.node]) return unsupported(g.node(loss.node), "does not depend on the batch");
  for (ValueRef value = loss;;) {
    const Node& node = g.node(value.node);
    if (loss_weight.valid() && node.op == "Div" && node.inputs[1] == loss_weight) {
      if (!from_batch[node.inputs[0].node]) return unsupported(node, "divides a value that does not depend on the batch");
      if (node.outputs[0].shape.rank() != 0 || g.type(node.inputs[0]).shape.rank() != 0) {
        return unsupported(node, "divides a value that is not a scalar by the loss weight");
      }
      return node.id;
    }
    if (loss_weight.valid() && node.op == "ReduceMean") {
      return unsupported(node, "averages over its elements, but the signature declares a loss weight to divide by");
    }
    if (node.op == "ReduceMean") {
      if (!averages_everything(g, node)) return unsupported(node, "averages over some axes only");
      return node.id;
    }
    MIRRA_ASSIGN_OR_RETURN(value, toward_the_mean(schemas, node, from_batch));
  }
}

ValueRef rebuild_loss(graph::Builder& b, const graph::Graph& g, ValueRef loss, NodeId mean_node, ValueRef mean,
                      const std::vector<bool>& from_batch, const std::function<ValueRef(ValueRef)>& term,
                      const std::function<ValueRef(ValueRef)>& place) {
  if (loss.node == mean_node) return mean;
  if (!from_batch[loss.node]) return term(loss);
  const Node& node = g.node(loss.node);
  std::vector<ValueRef> inputs;
  for (ValueRef input : node.inputs) inputs.push_back(rebuild_loss(b, g, input, mean_node, mean, from_batch, term, place));
  return place(b.add_value({.op = node.op, .inputs = std::move(inputs), .attrs = node.attrs}));
}

}  // namespace mirra::strategies
