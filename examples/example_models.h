// The example models as model files: each built with the C++ API (mlp_model.cc, cnn_model.cc, ...),
// the classifiers with the classifier objective (optionally label smoothing), linear regression with
// the mean squared error and the language models (bigram, the GPTs) with the mean cross-entropy per
// token, each with the benchmark optimizer (SGD, momentum 0.9, lr 0.05; the GPTs nanoGPT's AdamW) and
// its weights initialised from `seed`. `mirra-examples write mlp mlp.mirra` writes one.
//
//   MIRRA_ASSIGN_OR_RETURN(serialization::Model model, examples::build_example_model("cnn", /*seed=*/1));
//   MIRRA_RETURN_IF_ERROR(serialization::save_model(model, "cnn.mirra"));
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serialization/model_file.h"

namespace mirra::examples {

struct ExampleModel {
  std::string name;
  std::string description;
};

struct ExampleModelOptions {
  double label_smoothing = 0.0;  // of the cross-entropy (TensorFlow's label_smoothing), in [0, 1]
  int64_t features = 8, outputs = 1;  // of linear regression
  // Of the language models: unset, the model's own (bigram: 256 tokens, 64 a window; the GPT presets'
  // shapes, `gpt` gpt-tiny's).
  std::optional<int64_t> vocab, context;
  std::optional<int64_t> layers, heads, embedding;  // of the GPTs
  double dropout = 0.0;                              // of the GPTs
  // Of the ResNets: their activations' and variables' dtype, f32 or f64 (a float64 ResNet is what
  // equivalence checks compare at 1e-9; the others are built in f32).
  graph::DType dtype = graph::DType::f32;
};

const std::vector<ExampleModel>& example_models();
graph::Expected<serialization::Model> build_example_model(std::string_view name, uint64_t seed = 1,
                                                          const ExampleModelOptions& options = {});

}  // namespace mirra::examples
