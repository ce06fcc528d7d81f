// parse_model / load_model: a model file checked in layers before anything in it is believed.
//
// Note [Model file verification]
// 1. Framing: the size is bounded, the identifier is "MIRA", the FlatBuffers verifier accepts the
//    buffer (every offset, vector and string inside it, bounded depth and table count), and the
//    format version is one this build reads.
// 2. References: every node's inputs and control inputs name earlier nodes (the writer stores the
//    graph in topological order, so a cycle or a self-loop is a forward reference) and outputs they
//    have; names are non-empty and unique; devices parse.
// 3. Ops: each op is registered; its schema checks arity, attribute names and types, fills defaults
//    and infers dtypes and shapes from the inputs, so inconsistent types are rejected node by node.
// 4. Tensors (weights, constants, optimizer state): known dtype, rank and dimensions within
//    limits.h, exactly prod(shape) * sizeof(dtype) bytes computed in 64 bits with overflow checks,
//    CRC-32 matching; a weight names a Variable of the same dtype and shape.
//    A Variable is whole: shard_of (a replica's share, made by the sharded optimizer rewrite) and
//    partition_of (a parameter server's part, made by the partitioning rewrite) are refused.
// 5. Signature: features and labels are Placeholders, the loss a floating scalar, metrics in range,
//    the loss weight (when there is one) a floating scalar, each state update a node whose op writes
//    a variable.
// No allocation is sized by a number the earlier layers have not bounded.
//
// Note [Model file versions]
// A file keeps its meaning in every later build. Version 2 changed one thing: a reduction's "axes"
// follows TensorFlow, absent meaning every axis and an empty list none; version 1 wrote an empty
// list for every axis, so reading a version 1 file drops a reduction's empty "axes". Version 3 added
// the signature's state updates (writes of state the train step runs) and loss weight (what the loss
// averages over); older files have none, which is what they meant: no such write, and a loss averaged
// over the elements of its mean. Version 4 added the signature's batch inputs (the placeholders split
// between replicas, each with its axis); an older file has none, which is the rule it was trained
// under: every placeholder whose dim 0 is unknown, along dim 0. An older build refuses a newer file
// rather than split it by the other rule.
#include <set>

#include "graph/op_schema.h"
#include "serialization/attr_codec.h"
#include "serialization/file_io.h"
#include "serialization/limits.h"
#include "serialization/model_file.h"

namespace mirra::serialization {

namespace {

class ModelReader {
 public:
  ModelReader(const fb::Model& file, const graph::OpRegistry& registry, std::string_view source)
      : file_(file), registry_(registry), source_(source) {}

  graph::Expected<Model> read() {
    const uint32_t version = file_.format_version();
    if (version < kOldestModelFormatVersion || version > kModelFormatVersion) {
      return error("format version " + std::to_string(version) + " is not supported (this build reads " +
                   std::to_string(kOldestModelFormatVersion) + " to " + std::to_string(kModelFormatVersion) + ")");
    }
    MIRRA_RETURN_IF_ERROR(read_graph());
    MIRRA_RETURN_IF_ERROR(read_weights());
    MIRRA_RETURN_IF_ERROR(read_signature());
    if (const fb::Metadata* meta = file_.metadata()) {
      model_.metadata = {string_of(meta->producer()), string_of(meta->created()), string_of(meta->description())};
    }
    return std::move(model_);
  }

 private:
  static std::string string_of(const flatbuffers::String* s) { return s == nullptr ? std::string() : s->str(); }

  graph::Status error(const std::string& message) const {
    return graph::invalid_argument(std::string(source_) + ": " + message);
  }

  graph::Status read_graph() {
    const auto* nodes = file_.graph()->nodes();
    if (nodes == nullptr || nodes->size() == 0) return error("the graph has no nodes");
    if (nodes->size() > kMaxNodes) return error("the graph has " + std::to_string(nodes->size()) + " nodes, over the limit");
    for (uint32_t i = 0; i < nodes->size(); ++i) MIRRA_RETURN_IF_ERROR(read_node(i, *nodes->Get(i)));
    return graph::Status();
  }

  graph::Status read_node(uint32_t index, const fb::Node& in) {
    graph::Node node;
    node.op = in.op()->str();
    node.name = in.name()->str();
    const std::string where = "node " + std::to_string(index) + " '" + node.name + "'";
    if (node.name.empty()) return error("node " + std::to_string(index) + " has no name");
    if (model_.graph.contains(node.name)) return error(where + ": the name is taken by an earlier node");
    const graph::OpSchema* schema = registry_.find(node.op);
    if (schema == nullptr) return error(where + ": unknown op '" + node.op + "'");
    std::vector<graph::TensorType> input_types;
    if (const auto* inputs = in.inputs()) {
      for (uint32_t k = 0; k < inputs->size(); ++k) {
        const fb::ValueRef* ref = inputs->Get(k);
        const std::string input = where + " input " + std::to_string(k);
        if (ref->node() >= index) {
          return error(input + " reads node " + std::to_string(ref->node()) +
                       ", which does not come before it (a cycle, a self-loop or a missing node)");
        }
        const graph::Node& producer = model_.graph.node(ref->node());
        if (ref->output() >= producer.outputs.size()) {
          return error(input + " reads output " + std::to_string(ref->output()) + " of '" + producer.name + "', which has " +
                       std::to_string(producer.outputs.size()));
        }
        node.inputs.push_back({ref->node(), ref->output()});
        input_types.push_back(producer.outputs[ref->output()]);
      }
    }
    if (const auto* control = in.control_inputs()) {
      for (const uint32_t c : *control) {
        if (c >= index) return error(where + " runs after node " + std::to_string(c) + ", which does not come before it");
        node.control_inputs.push_back(c);
      }
    }
    if (in.device() != nullptr) {
      auto device = graph::DeviceId::parse(in.device()->str());
      if (!device.ok()) return error(where + ": " + device.status().message());
      node.device = *device;
    }
    auto attrs = read_attrs(in.attrs(), where);
    if (!attrs.ok()) return error(attrs.status().message());
    node.attrs = std::move(*attrs);
    if (node.op == "Variable" && node.attrs.contains("shard_of")) {
      return error(where + ": shard_of marks a replica's share of sharded optimizer state, which no model file holds");
    }
    if (node.op == "Variable" && (node.attrs.contains("partition_of") || node.attrs.contains("partition_offset"))) {
      return error(where + ": partition_of marks a parameter server's part of a variable, which no model file holds");
    }
    upgrade_from_older_version(*schema, node);
    auto outputs = graph::check_and_infer(*schema, node, input_types);
    if (!outputs.ok()) return error(outputs.status().message());
    for (const graph::TensorType& type : *outputs) {
      if (type.shape.rank() > kMaxRank) return error(where + ": an output's rank exceeds " + std::to_string(kMaxRank));
    }
    node.outputs = std::move(*outputs);
    model_.graph.add_node(std::move(node));
    return graph::Status();
  }

  // See Note [Model file versions].
  void upgrade_from_older_version(const graph::OpSchema& schema, graph::Node& node) const {
    if (file_.format_version() >= 2 || !schema.has(graph::kReduction)) return;
    const auto* axes = node.attrs.get<std::vector<int64_t>>("axes");
    if (axes != nullptr && axes->empty()) node.attrs.erase("axes");
  }

  graph::Status read_weights() {
    MIRRA_ASSIGN_OR_RETURN(model_.weights, read_tensors(file_.weights(), std::string(source_) + ": weights"));
    for (const NamedTensor& w : model_.weights) {
      const auto id = model_.graph.find(w.name);
      if (!id || model_.graph.node(*id).op != "Variable") return error("weight '" + w.name + "' names no Variable");
      const graph::TensorType& type = model_.graph.node(*id).outputs[0];
      if (!(type == w.value.type)) {
        return error("weight '" + w.name + "' is " + w.value.type.to_string() + ", but its Variable is " + type.to_string());
      }
    }
    return graph::Status();
  }

  graph::Expected<graph::ValueRef> value(const fb::ValueRef* ref, const std::string& what) const {
    if (ref == nullptr) return error("the signature has no " + what);
    if (ref->node() >= model_.graph.size() || ref->output() >= model_.graph.node(ref->node()).outputs.size()) {
      return error("the signature's " + what + " reads node " + std::to_string(ref->node()) + " output " +
                   std::to_string(ref->output()) + ", which does not exist");
    }
    return graph::ValueRef{ref->node(), ref->output()};
  }

  graph::Expected<std::string> placeholder(uint32_t index, const std::string& what) const {
    if (index >= model_.graph.size() || model_.graph.node(index).op != "Placeholder") {
      return error("the signature's " + what + " (node " + std::to_string(index) + ") is not a Placeholder");
    }
    return model_.graph.node(index).name;
  }

  // Each a Placeholder with the axis, once, and the features among them (when any is declared).
  graph::Status read_batch_inputs(const fb::Signature& in) {
    const auto* inputs = in.batch_inputs();
    if (inputs == nullptr || inputs->size() == 0) return graph::Status();
    TrainingSignature& out = model_.signature;
    for (const fb::BatchInput* input : *inputs) {
      MIRRA_ASSIGN_OR_RETURN(std::string name, placeholder(input->placeholder(), "batch input"));
      const int64_t rank = model_.graph.node(input->placeholder()).outputs[0].shape.rank();
      if (input->axis() >= rank) {
        return error("the signature's batch input '" + name + "' has no axis " + std::to_string(input->axis()) +
                     " (it has " + std::to_string(rank) + ")");
      }
      for (const BatchInput& earlier : out.batch_inputs) {
        if (earlier.placeholder == name) return error("the signature's batch input '" + name + "' appears twice");
      }
      out.batch_inputs.push_back({std::move(name), static_cast<int64_t>(input->axis())});
    }
    for (const BatchInput& input : out.batch_inputs) {
      if (input.placeholder == out.features) return graph::Status();
    }
    return error("the signature's batch inputs leave out the features '" + out.features + "'");
  }

  graph::Status read_signature() {
    const fb::Signature& in = *file_.signature();
    TrainingSignature& out = model_.signature;
    MIRRA_ASSIGN_OR_RETURN(out.features, placeholder(in.features(), "features"));
    MIRRA_ASSIGN_OR_RETURN(out.labels, placeholder(in.labels(), "labels"));
    MIRRA_RETURN_IF_ERROR(read_batch_inputs(in));
    MIRRA_ASSIGN_OR_RETURN(out.loss, value(in.loss(), "loss"));
    const graph::TensorType& loss = model_.graph.type(out.loss);
    if (!graph::is_floating(loss.dtype) || loss.shape.rank() != 0) {
      return error("the signature's loss must be a floating scalar, not " + loss.to_string());
    }
    if (const auto* metrics = in.metrics()) {
      for (uint32_t i = 0; i < metrics->size(); ++i) {
        const fb::Metric& m = *metrics->Get(i);
        const std::string name = m.name()->str();
        if (out.metric(name).valid()) return error("metric '" + name + "' appears twice");
        Metric metric{.name = name};
        MIRRA_ASSIGN_OR_RETURN(metric.value, value(m.value(), "metric '" + name + "'"));
        if (m.reduction() != nullptr) metric.reduction = m.reduction()->str();
        if (metric.reduction != "sum" && metric.reduction != "mean" && metric.reduction != "exp_mean") {
          return error("metric '" + name + "' has reduction '" + metric.reduction + "' (sum, mean or exp_mean)");
        }
        if (m.weight() != nullptr) {
          MIRRA_ASSIGN_OR_RETURN(metric.weight, value(m.weight(), "weight of metric '" + name + "'"));
        }
        for (const graph::ValueRef v : {metric.value, metric.weight}) {
          if (!v.valid()) continue;
          const graph::TensorType& type = model_.graph.type(v);
          if (type.shape.rank() != 0) return error("metric '" + name + "' must be a scalar, not " + type.to_string());
        }
        out.metrics.push_back(std::move(metric));
      }
    }
    if (in.loss_weight() != nullptr) {
      MIRRA_ASSIGN_OR_RETURN(out.loss_weight, value(in.loss_weight(), "loss weight"));
      const graph::TensorType& weight = model_.graph.type(out.loss_weight);
      if (!graph::is_floating(weight.dtype) || weight.shape.rank() != 0) {
        return error("the signature's loss weight must be a floating scalar, not " + weight.to_string());
      }
    }
    if (const auto* updates = in.state_updates()) {
      for (uint32_t index : *updates) {
        const graph::OpSchema* schema = index < model_.graph.size() ? registry_.find(model_.graph.node(index).op) : nullptr;
        if (schema == nullptr || schema->updates.empty()) {
          return error("the signature's state update (node " + std::to_string(index) + ") is no write of a variable");
        }
        out.state_updates.push_back(model_.graph.node(index).name);
      }
    }
    const fb::Optimizer& optimizer = *in.optimizer();
    out.optimizer.kind = optimizer.kind()->str();
    MIRRA_ASSIGN_OR_RETURN(out.optimizer.hyper_parameters, read_attrs(optimizer.hyper_parameters(), "the optimizer"));
    MIRRA_ASSIGN_OR_RETURN(out.optimizer.state,
                           read_tensors(optimizer.state(), std::string(source_) + ": optimizer state"));
    return graph::Status();
  }

  const fb::Model& file_;
  const graph::OpRegistry& registry_;
  std::string_view source_;
  Model model_;
};

}  // namespace

graph::Expected<Model> parse_model(std::span<const uint8_t> bytes, const graph::OpRegistry& registry,
                                   std::string_view source) {
  if (bytes.size() > kMaxFileBytes) return graph::invalid_argument(std::string(source) + ": too large");
  if (bytes.size() < 8 || !fb::ModelBufferHasIdentifier(bytes.data())) {
    return graph::invalid_argument(std::string(source) + ": not a mirra model file (no \"MIRA\" identifier)");
  }
  AlignedBytes copy;
  bytes = aligned_view(bytes, copy);
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), /*max_depth=*/64, /*max_tables=*/4'000'000);
  if (!fb::VerifyModelBuffer(verifier)) {
    return graph::invalid_argument(std::string(source) + ": corrupted or truncated (the FlatBuffers verifier rejects it)");
  }
  return ModelReader(*fb::GetModel(bytes.data()), registry, source).read();
}

graph::Expected<Model> load_model(const std::string& path, const graph::OpRegistry& registry) {
  MIRRA_ASSIGN_OR_RETURN(const AlignedBytes bytes, read_file(path, "model file"));
  return parse_model(bytes.span(), registry, "model file '" + path + "'");
}

}  // namespace mirra::serialization
