// open_data_source: the source of a spec's format; program_dataset: a Feed per placeholder from the
// model's types.
#include "tools/mirra/program_data.h"

#include <algorithm>

#include "ops/dropout_ops.h"
#include "runtime/data/csv_file.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/numpy_file.h"
#include "runtime/data/tfrecord_file.h"
#include "runtime/data/token_file.h"

namespace mirra::runner {

using runtime::data::Feed;

graph::Expected<std::shared_ptr<const runtime::data::ExampleSource>> open_data_source(const DataSpec& spec, DataUse use,
                                                                                     CorruptRecords corrupt) {
  if (spec.format == "fashion_mnist") {
    return runtime::data::fashion_mnist_source(spec.files.at(0), use == DataUse::train ? runtime::data::Split::train
                                                                                        : runtime::data::Split::test);
  }
  if (spec.format == "numpy") return runtime::data::numpy_source(spec.files);
  if (spec.format == "csv") return runtime::data::csv_source(spec.files, {.fields = spec.columns});
  if (spec.format == "tokens") {
    if (spec.files.size() != 1) return graph::invalid_argument("a token data set is one file, not " + std::to_string(spec.files.size()));
    // Evaluation reads the windows in order, whatever training samples.
    return runtime::data::token_windows(spec.files[0], {.type = *runtime::data::parse_element_type(spec.tokens.type),
                                                        .context = spec.tokens.context,
                                                        .random_offsets = use == DataUse::train && spec.tokens.sampling == "random"});
  }
  if (spec.format == "tfrecord") {
    MIRRA_ASSIGN_OR_RETURN(runtime::data::TfRecordSource records,
                           runtime::data::tfrecord_source(spec.files, {.features = spec.features, .gzip = spec.gzip,
                                                                       .skip_corrupt = corrupt.skip}));
    if (corrupt.skipped != nullptr) *corrupt.skipped += records.skipped;
    return records.source;
  }
  if (spec.format == "images") {
    MIRRA_ASSIGN_OR_RETURN(runtime::data::ImageFolder folder,
                           runtime::data::image_folder_source(spec.files[0], {.height = spec.images.height,
                                                                              .width = spec.images.width,
                                                                              .channels = spec.images.channels}));
    return folder.source;
  }
  return graph::invalid_argument("data format '" + spec.format + "' is not known (fashion_mnist, numpy, csv, tokens, tfrecord, images)");
}

namespace {

std::string placeholder_names(const graph::Graph& graph) {
  std::string names;
  for (const graph::Node& node : graph.nodes()) {
    if (node.op == "Placeholder") names += (names.empty() ? "'" : ", '") + node.name + "' (" + node.outputs[0].to_string() + ")";
  }
  return names.empty() ? "none" : names;
}

// The normalisation (value * scale - mean[c]) / stddev[c] as per-channel scale and shift.
graph::Status set_normalisation(const FieldFeed& field, Feed& feed, const std::string& what) {
  if (field.scale == 1 && field.mean.empty() && field.stddev.empty()) return graph::Status();
  const size_t channels = std::max({field.mean.size(), field.stddev.size(), size_t{1}});
  if ((field.mean.size() > 1 && field.mean.size() != channels) || (field.stddev.size() > 1 && field.stddev.size() != channels)) {
    return graph::invalid_argument(what + ": mean and stddev hold " + std::to_string(field.mean.size()) + " and " +
                                   std::to_string(field.stddev.size()) + " channels");
  }
  for (size_t c = 0; c < channels; ++c) {
    const double mean = field.mean.empty() ? 0.0 : field.mean[field.mean.size() == 1 ? 0 : c];
    const double stddev = field.stddev.empty() ? 1.0 : field.stddev[field.stddev.size() == 1 ? 0 : c];
    feed.scale.push_back(field.scale / stddev);
    feed.shift.push_back(-mean / stddev);
  }
  return graph::Status();
}

// The feed of `placeholder` from `field`, in the placeholder's dtype and per-example shape.
graph::Expected<Feed> feed_of(const graph::Graph& graph, const runtime::training::TrainingGraph& signature,
                              const std::string& placeholder, const FieldFeed& field, const std::string& data_name) {
  const std::string what = data_name + ", field '" + field.field + "' feeding '" + placeholder + "'";
  const auto id = graph.find(placeholder);
  if (!id || graph.node(*id).op != "Placeholder") {
    return graph::invalid_argument(what + ": the model has no placeholder '" + placeholder + "' (its placeholders: " +
                                   placeholder_names(graph) + ")");
  }
  for (const runtime::training::BatchInput& input : signature.batch_inputs) {
    if (input.name == placeholder && input.axis != 0) {
      return graph::invalid_argument(what + ": the placeholder carries the batch along axis " + std::to_string(input.axis) +
                                     "; data sets feed batches along axis 0");
    }
  }
  const graph::TensorType& type = graph.node(*id).outputs[0];
  if (type.shape.rank() < 1) return graph::invalid_argument(what + ": the placeholder " + type.to_string() + " has no batch dim");
  Feed feed{.placeholder = placeholder, .field = field.field, .dtype = type.dtype, .one_hot = field.one_hot};
  const std::vector<int64_t> example(type.shape.dims.begin() + 1, type.shape.dims.end());
  if (std::all_of(example.begin(), example.end(), [](int64_t d) { return d >= 0; })) feed.shape = example;
  MIRRA_RETURN_IF_ERROR(set_normalisation(field, feed, what));
  return feed;
}

}  // namespace

graph::Expected<runtime::data::Dataset> program_dataset(const DataSpec& spec, const graph::Graph& graph,
                                                        const runtime::training::TrainingGraph& signature, DataUse use,
                                                        runtime::data::BatchingOptions options,
                                                        const runtime::data::ImageAugmentation& augmentation,
                                                        CorruptRecords corrupt) {
  MIRRA_ASSIGN_OR_RETURN(auto source, open_data_source(spec, use, corrupt));
  std::map<std::string, FieldFeed> fields = spec.fields;
  if (fields.empty() && spec.format == "fashion_mnist") {
    fields[signature.features] = {.field = "image", .scale = 1.0 / 255.0};
    fields[signature.labels] = {.field = "label"};
  } else if (fields.empty() && spec.format == "images") {
    fields[signature.features] = {.field = "image"};  // 0 to 255, as Keras gives them
    fields[signature.labels] = {.field = "label"};
  } else if (fields.empty()) {
    // Every placeholder from the field of its name.
    for (const runtime::data::Field& field : source->fields()) {
      const auto id = graph.find(field.name);
      if (id && graph.node(*id).op == "Placeholder") fields[field.name] = {.field = field.name};
    }
    if (fields.empty()) {
      std::string names;
      for (const runtime::data::Field& field : source->fields()) names += (names.empty() ? "" : ", ") + field.to_string();
      return graph::invalid_argument(source->name() + ": none of its fields (" + names + ") is named as a placeholder of the model (" +
                                     placeholder_names(graph) + "); name which field feeds which in the config's data fields");
    }
  }
  // A model that draws per example (dropout) reads each example's key.
  if (const auto keys = graph.find(std::string(ops::kExampleKeysPlaceholder)); keys && graph.node(*keys).op == "Placeholder") {
    options.example_keys = std::string(ops::kExampleKeysPlaceholder);
    fields.erase(options.example_keys);
  }
  std::vector<Feed> feeds;
  for (const auto& [placeholder, field] : fields) {
    MIRRA_ASSIGN_OR_RETURN(Feed feed, feed_of(graph, signature, placeholder, field, source->name()));
    if (placeholder == signature.features) feed.augmentation = augmentation;
    feeds.push_back(std::move(feed));
  }
  return runtime::data::Dataset::create(std::move(source), std::move(feeds), options);
}

graph::Expected<DataSpec> evaluation_spec(const std::optional<DataSpec>& eval, const DataSpec& train) {
  if (eval) return *eval;
  if (train.format == "fashion_mnist") return train;  // its test split
  return graph::invalid_argument("evaluation needs its own data set: name it in the config's data.eval");
}

}  // namespace mirra::runner
