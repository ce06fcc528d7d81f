// Model files: one replica's model graph (forward pass and loss, no gradients), the values of its
// variables, the training signature (what to feed, what to minimise, what to report, and the
// optimizer with its hyper-parameters and state) and metadata. The file format is
// serialization/mirra.fbs, described in docs/file-format.md.
//
//   MIRRA_RETURN_IF_ERROR(serialization::save_model(model, "mlp.mirra"));
//   MIRRA_ASSIGN_OR_RETURN(serialization::Model loaded, serialization::load_model("mlp.mirra", ops::registry()));
//
// Loading never trusts the file: see Note [Model file verification] in model_reader.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "serialization/tensor_codec.h"

namespace mirra::serialization {

struct Metric {
  std::string name;
  graph::ValueRef value;
  // "sum", "mean" or "exp_mean", and for a mean the weight it divides by (invalid: the elements it
  // averages), as runtime::training::TrainingMetric.
  std::string reduction = "sum";
  graph::ValueRef weight;
  friend bool operator==(const Metric&, const Metric&) = default;
};

// A placeholder that carries the batch, and its axis, as runtime::training::BatchInput.
struct BatchInput {
  std::string placeholder;
  int64_t axis = 0;
  friend bool operator==(const BatchInput&, const BatchInput&) = default;
};

struct OptimizerSpec {
  std::string kind = "sgd";         // sgd, momentum, adam, adamw (ops::optimizer_from_spec reads it)
  graph::AttrMap hyper_parameters;  // learning_rate, momentum, ...
  std::vector<NamedTensor> state;   // slots and the iteration counter, after training; else empty
  friend bool operator==(const OptimizerSpec&, const OptimizerSpec&) = default;
};

struct TrainingSignature {
  std::string features = "images";  // Placeholder names
  std::string labels = "labels";
  // The placeholders a replicating strategy splits, each along its axis (features among them); empty:
  // every placeholder whose dim 0 is unknown (runtime::training::TrainingGraph::batch_inputs).
  std::vector<BatchInput> batch_inputs;
  graph::ValueRef loss;             // scalar mean loss of a batch
  // What it averages over when not the elements of its mean over the batch: a scalar counted from the
  // batch (runtime::training::TrainingGraph::loss_weight); invalid: the elements.
  graph::ValueRef loss_weight;
  std::vector<Metric> metrics;      // "correct": correctly classified examples in a batch
  OptimizerSpec optimizer;
  // Nodes the train step also runs, by name: writes of state (moving statistics) from the batch,
  // which a replicating strategy combines as their variable's aggregation says.
  std::vector<std::string> state_updates;

  // The metric called `name`, or an invalid ValueRef.
  graph::ValueRef metric(std::string_view name) const;
  friend bool operator==(const TrainingSignature&, const TrainingSignature&) = default;
};

struct ModelMetadata {
  std::string producer;     // filled by save_model when empty
  std::string created;      // ISO 8601 UTC; filled by save_model when empty
  std::string description;
  friend bool operator==(const ModelMetadata&, const ModelMetadata&) = default;
};

struct Model {
  graph::Graph graph;
  std::vector<NamedTensor> weights;  // by Variable node name; the others start from their initialiser
  TrainingSignature signature;
  ModelMetadata metadata;
};

// The bytes of a model file; the graph is written in topological order. Errors: a signature value
// or weight that names no node of the graph.
graph::Expected<flatbuffers::DetachedBuffer> serialize_model(const Model& model);
graph::Status save_model(const Model& model, const std::string& path);

// A model from the bytes of a file: verified in layers, every failure an invalid_argument error
// naming what is wrong and where. `source` names the bytes in messages.
graph::Expected<Model> parse_model(std::span<const uint8_t> bytes, const graph::OpRegistry& registry,
                                   std::string_view source = "model file");
graph::Expected<Model> load_model(const std::string& path, const graph::OpRegistry& registry);

// "2026-11-29T22:21:56Z"
std::string utc_timestamp();

}  // namespace mirra::serialization
