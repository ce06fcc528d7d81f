// The data sets a model program trains and evaluates on: a DataSpec opened as its format's source
// (Fashion-MNIST's split, NumPy, CSV, token or TFRecord files, a folder of images), and its fields fed to the model's placeholders as their
// dtypes and per-example shapes say (runtime/data/dataset.h). Errors name the data set, the field and
// the placeholder before any step runs: a field that is missing, a placeholder that is not one, a
// dtype that cannot be converted, values that do not make the placeholder's shape.
//
//   auto train = program_dataset(spec, graph, signature, DataUse::train, {.batch_size = 128, .seed = 1});
#pragma once

#include "graph/graph.h"
#include "runtime/data/dataset.h"
#include "runtime/training/trainer.h"
#include "tools/mirra/data_spec.h"

namespace mirra::runner {

// Which split a Fashion-MNIST directory gives: the training images, or its test split.
enum class DataUse { train, eval };

// What a data set reading corrupt records does: fail at the first (the default), or leave them out and
// count them in `*skipped` (TFRecord files: data.skip_corrupt).
struct CorruptRecords {
  bool skip = false;
  int64_t* skipped = nullptr;
};

// The spec's data set as its format's source: its fields as the files hold them.
graph::Expected<std::shared_ptr<const runtime::data::ExampleSource>> open_data_source(const DataSpec& spec, DataUse use,
                                                                                     CorruptRecords corrupt = {});

graph::Expected<runtime::data::Dataset> program_dataset(const DataSpec& spec, const graph::Graph& graph,
                                                        const runtime::training::TrainingGraph& signature, DataUse use,
                                                        runtime::data::BatchingOptions options,
                                                        const runtime::data::ImageAugmentation& augmentation = {},
                                                        CorruptRecords corrupt = {});

// The evaluation data of a run: `eval` when given, else a Fashion-MNIST training spec's test split;
// an error when neither says where the evaluation data is.
graph::Expected<DataSpec> evaluation_spec(const std::optional<DataSpec>& eval, const DataSpec& train);

}  // namespace mirra::runner
