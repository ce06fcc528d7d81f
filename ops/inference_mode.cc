// inference_copies: copies of the nodes between training-mode ops and the roots, in inference mode.
#include "ops/inference_mode.h"

#include "graph/op_schema.h"

namespace mirra::ops {

namespace {

constexpr std::string_view kPrefix = "inference/";

// `node` with its training attribute false, when the schema has one, it is set, and the node checks
// with it false; else nullopt.
std::optional<graph::Node> in_inference_mode(const graph::Graph& graph, const graph::OpSchema& schema, const graph::Node& node) {
  if (schema.training_attr.empty()) return std::nullopt;
  const bool* training = node.attrs.get<bool>(schema.training_attr);
  if (training == nullptr || !*training) return std::nullopt;
  graph::Node flipped = node;
  flipped.attrs.set(schema.training_attr, false);
  std::vector<graph::TensorType> inputs;
  for (const graph::ValueRef input : node.inputs) inputs.push_back(graph.type(input));
  if (!graph::check_and_infer(schema, flipped, inputs).ok()) return std::nullopt;
  return flipped;
}

}  // namespace

graph::Expected<std::vector<graph::ValueRef>> inference_copies(graph::Graph& graph, const graph::OpRegistry& schemas,
                                                                std::span<const graph::ValueRef> roots) {
  std::vector<graph::NodeId> root_nodes;
  for (const graph::ValueRef root : roots) {
    if (!root.valid() || root.node >= graph.size()) return graph::invalid_argument("inference_copies: a root outside the graph");
    root_nodes.push_back(root.node);
  }
  const std::vector<bool> needed = graph.needed_for(root_nodes);
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::NodeId> order, graph.topological_order());
  std::vector<graph::NodeId> copy(graph.size(), graph::kInvalidNode);
  const auto copied = [&](graph::NodeId id) { return copy[id] != graph::kInvalidNode; };
  for (const graph::NodeId id : order) {
    if (!needed[id]) continue;
    const graph::Node& original = graph.node(id);
    const graph::OpSchema* schema = schemas.find(original.op);
    std::optional<graph::Node> node = schema != nullptr ? in_inference_mode(graph, *schema, original) : std::nullopt;
    const bool downstream = std::any_of(original.inputs.begin(), original.inputs.end(),
                                        [&](graph::ValueRef input) { return copied(input.node); }) ||
                            std::any_of(original.control_inputs.begin(), original.control_inputs.end(), copied);
    if (!node && !downstream) continue;
    if (!node) node = original;
    node->name = graph.unique_name(std::string(kPrefix) + original.name);
    for (graph::ValueRef& input : node->inputs) {
      if (copied(input.node)) input.node = copy[input.node];
    }
    for (graph::NodeId& control : node->control_inputs) {
      if (copied(control)) control = copy[control];
    }
    if (schema != nullptr && schema->has(graph::kCollective)) {
      if (const std::string* group = node->attrs.get<std::string>("group")) {
        node->attrs.set("group", std::string(kPrefix) + *group);
      }
    }
    copy[id] = graph.add_node(std::move(*node));
  }
  std::vector<graph::ValueRef> result;
  for (const graph::ValueRef root : roots) result.push_back(copied(root.node) ? graph::ValueRef{copy[root.node], root.output} : root);
  return result;
}

graph::Status add_inference_values(graph::Graph& graph, const graph::OpRegistry& schemas,
                                   runtime::training::TrainingGraph& signature) {
  std::vector<graph::ValueRef> roots;
  const auto root = [&](graph::ValueRef value) {
    if (value.valid()) roots.push_back(value);
  };
  root(signature.loss);
  root(signature.correct);
  root(signature.loss_weight);
  for (const runtime::training::TrainingMetric& metric : signature.metrics) {
    root(metric.value);
    root(metric.weight);
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::ValueRef> copies, inference_copies(graph, schemas, roots));
  if (copies == roots) {
    signature.inference.reset();
    return graph::Status();
  }
  size_t next = 0;
  const auto copy_of = [&](graph::ValueRef value) { return value.valid() ? copies[next++] : value; };
  runtime::training::InferenceValues inference;
  inference.loss = copy_of(signature.loss);
  inference.correct = copy_of(signature.correct);
  inference.loss_weight = copy_of(signature.loss_weight);
  for (runtime::training::TrainingMetric metric : signature.metrics) {
    metric.value = copy_of(metric.value);
    metric.weight = copy_of(metric.weight);
    inference.metrics.push_back(std::move(metric));
  }
  signature.inference = std::move(inference);
  return graph::Status();
}

}  // namespace mirra::ops
