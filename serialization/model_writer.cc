// serialize_model / save_model: the graph renumbered into topological order, weights 64-byte aligned.
#include <ctime>
#include <limits>
#include <unordered_map>

#include "serialization/attr_codec.h"
#include "serialization/file_io.h"
#include "serialization/limits.h"
#include "serialization/model_file.h"

namespace mirra::serialization {

namespace {

fb::ValueRef renumbered(const std::vector<uint32_t>& index_of, graph::ValueRef value) {
  return fb::ValueRef(index_of[value.node], value.output);
}

}  // namespace

graph::ValueRef TrainingSignature::metric(std::string_view name) const {
  for (const Metric& m : metrics) {
    if (m.name == name) return m.value;
  }
  return {};
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

graph::Expected<flatbuffers::DetachedBuffer> serialize_model(const Model& model) {
  const graph::Graph& g = model.graph;
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::NodeId> order, g.topological_order());
  std::vector<uint32_t> index_of(g.size());
  for (uint32_t i = 0; i < order.size(); ++i) index_of[order[i]] = i;
  auto value_in_graph = [&](graph::ValueRef v, const std::string& what) -> graph::Status {
    if (!v.valid() || v.node >= g.size() || v.output >= g.node(v.node).outputs.size()) {
      return graph::invalid_argument("the signature's " + what + " is not a value of the graph");
    }
    return graph::Status();
  };
  auto node_index = [&](const std::string& name, const std::string& what) -> graph::Expected<uint32_t> {
    const auto id = g.find(name);
    if (!id) return graph::invalid_argument("the signature's " + what + " '" + name + "' is not a node of the graph");
    return index_of[*id];
  };
  MIRRA_RETURN_IF_ERROR(value_in_graph(model.signature.loss, "loss"));
  if (model.signature.loss_weight.valid()) MIRRA_RETURN_IF_ERROR(value_in_graph(model.signature.loss_weight, "loss weight"));
  for (const Metric& m : model.signature.metrics) {
    MIRRA_RETURN_IF_ERROR(value_in_graph(m.value, "metric " + m.name));
    if (m.weight.valid()) MIRRA_RETURN_IF_ERROR(value_in_graph(m.weight, "metric " + m.name + "'s weight"));
  }
  for (const NamedTensor& w : model.weights) {
    const auto id = g.find(w.name);
    if (!id || g.node(*id).op != "Variable") {
      return graph::invalid_argument("weight '" + w.name + "' names no Variable of the graph");
    }
  }
  MIRRA_ASSIGN_OR_RETURN(const uint32_t features, node_index(model.signature.features, "features"));
  MIRRA_ASSIGN_OR_RETURN(const uint32_t labels, node_index(model.signature.labels, "labels"));
  std::vector<fb::BatchInput> batch_inputs;
  for (const BatchInput& input : model.signature.batch_inputs) {
    MIRRA_ASSIGN_OR_RETURN(const uint32_t index, node_index(input.placeholder, "batch input"));
    if (input.axis < 0 || input.axis > std::numeric_limits<uint32_t>::max()) {
      return graph::invalid_argument("the signature's batch input '" + input.placeholder + "' has axis " +
                                     std::to_string(input.axis));
    }
    batch_inputs.emplace_back(index, static_cast<uint32_t>(input.axis));
  }
  std::vector<uint32_t> state_updates;
  for (const std::string& update : model.signature.state_updates) {
    MIRRA_ASSIGN_OR_RETURN(const uint32_t index, node_index(update, "state update"));
    state_updates.push_back(index);
  }

  flatbuffers::FlatBufferBuilder fbb(encoded_size_hint(model.weights) + encoded_size_hint(model.signature.optimizer.state) +
                                     g.size() * 256 + (1 << 16));
  fbb.ForceDefaults(true);  // every field present: explicit files, and readers need no defaults
  // Weights first: the largest blocks sit at the end of the file, each on a 64-byte boundary.
  const auto weights = write_tensors(fbb, model.weights);
  const auto optimizer_state = write_tensors(fbb, model.signature.optimizer.state);
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  nodes.reserve(order.size());
  for (const graph::NodeId id : order) {
    const graph::Node& node = g.node(id);
    std::vector<fb::ValueRef> inputs;
    for (const graph::ValueRef input : node.inputs) inputs.push_back(renumbered(index_of, input));
    std::vector<uint32_t> control;
    for (const graph::NodeId c : node.control_inputs) control.push_back(index_of[c]);
    const auto attrs = write_attrs(fbb, node.attrs);
    const auto device = node.device ? fbb.CreateString(node.device->to_string()) : flatbuffers::Offset<flatbuffers::String>();
    nodes.push_back(fb::CreateNode(fbb, fbb.CreateString(node.op), fbb.CreateString(node.name),
                                   fbb.CreateVectorOfStructs(inputs), fbb.CreateVector(control), attrs, device));
  }
  const auto graph_offset = fb::CreateGraph(fbb, fbb.CreateVector(nodes));
  std::vector<flatbuffers::Offset<fb::Metric>> metrics;
  for (const Metric& m : model.signature.metrics) {
    const fb::ValueRef value = renumbered(index_of, m.value);
    const fb::ValueRef weight = m.weight.valid() ? renumbered(index_of, m.weight) : fb::ValueRef();
    metrics.push_back(fb::CreateMetric(fbb, fbb.CreateString(m.name), &value, fbb.CreateString(m.reduction),
                                       m.weight.valid() ? &weight : nullptr));
  }
  const auto optimizer = fb::CreateOptimizer(fbb, fbb.CreateString(model.signature.optimizer.kind),
                                             write_attrs(fbb, model.signature.optimizer.hyper_parameters), optimizer_state);
  const fb::ValueRef loss = renumbered(index_of, model.signature.loss);
  const fb::ValueRef loss_weight =
      model.signature.loss_weight.valid() ? renumbered(index_of, model.signature.loss_weight) : fb::ValueRef();
  const auto signature = fb::CreateSignature(fbb, features, labels, &loss, fbb.CreateVector(metrics), optimizer,
                                             fbb.CreateVector(state_updates),
                                             model.signature.loss_weight.valid() ? &loss_weight : nullptr,
                                             fbb.CreateVectorOfStructs(batch_inputs));
  const ModelMetadata& meta = model.metadata;
  const auto metadata = fb::CreateMetadata(
      fbb, fbb.CreateString(meta.producer.empty() ? "mirra 0.1.0" : meta.producer),
      fbb.CreateString(meta.created.empty() ? utc_timestamp() : meta.created), fbb.CreateString(meta.description));
  fb::FinishModelBuffer(fbb, fb::CreateModel(fbb, kModelFormatVersion, metadata, graph_offset, weights, signature));
  return fbb.Release();
}

graph::Status save_model(const Model& model, const std::string& path) {
  MIRRA_ASSIGN_OR_RETURN(const flatbuffers::DetachedBuffer bytes, serialize_model(model));
  return write_file_atomically(path, {bytes.data(), bytes.size()});
}

}  // namespace mirra::serialization
