// The example models, built with the C++ API, each in its own file: an MLP 784-256-128-10 (ReLU),
// the TensorFlow-tutorial CNN (conv 5x5x32 SAME + ReLU, max-pool 2x2, conv 5x5x64 SAME + ReLU,
// max-pool 2x2, dense 1024 + ReLU, dense 10) and ResNet-20 (resnet_model.cc), which read images
// [batch, 28, 28, 1] from a placeholder named "images" and produce logits [batch, 10]; ResNet-18,
// ResNet-50 and ResNet-101 at ImageNet's shapes (resnet_imagenet_model.cc): images [batch, 224,
// 224, 3], logits [batch, 1000]; VGG-16 and Inception V3 (vgg_model.cc, inception_model.cc); linear
// regression (linear_model.cc), a classifier of bags of ids (embedding_bag_model.cc), a bigram
// language model (bigram_model.cc) and a GPT (gpt_model.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::examples {

struct Classifier {
  graph::ValueRef images;  // placeholder [?, height, width, channels]
  graph::ValueRef logits;  // [?, classes]
  // What a training step also runs: the updates of batch normalisation's moving statistics.
  std::vector<graph::NodeId> state_updates;
};

Classifier build_mlp(graph::Builder& b);
Classifier build_cnn(graph::Builder& b);
Classifier build_resnet20(graph::Builder& b);

// ResNet-20 at other sizes (the references test a narrow one in float64).
struct ResNet20Options {
  graph::DType dtype = graph::DType::f32;
  int64_t width = 16;  // stage 1's channels; stages 2 and 3 have twice and four times as many
  std::vector<int64_t> image = {28, 28, 1};  // height, width, channels
  int64_t classes = 10;
};
Classifier build_resnet20(graph::Builder& b, const ResNet20Options& options);

// ResNet-18, ResNet-50 and ResNet-101 (torchvision's), at ImageNet's shapes by default.
struct ResNetOptions {
  graph::DType dtype = graph::DType::f32;
  int64_t width = 64;  // the stem's and stage 1's channels; stage k has 2^(k-1) times as many
  std::vector<int64_t> image = {224, 224, 3};  // height, width, channels
  int64_t classes = 1000;
};
Classifier build_resnet18(graph::Builder& b, const ResNetOptions& options);
Classifier build_resnet50(graph::Builder& b, const ResNetOptions& options);
Classifier build_resnet101(graph::Builder& b, const ResNetOptions& options);
Classifier build_resnet18(graph::Builder& b);
Classifier build_resnet50(graph::Builder& b);
Classifier build_resnet101(graph::Builder& b);

// The models of the published scaling figures mirra simulate is checked against, at ImageNet's
// shapes: VGG-16 (vgg_model.cc; images [batch, 224, 224, 3]) and Inception V3 (inception_model.cc;
// [batch, 299, 299, 3]), logits [batch, 1000].
Classifier build_vgg16(graph::Builder& b);
Classifier build_inception_v3(graph::Builder& b);

// A regressor: inputs [?, features], predictions [?, outputs].
struct Regressor {
  graph::ValueRef inputs;       // placeholder "inputs"
  graph::ValueRef predictions;
};
// Linear regression (linear_model.cc): predictions = inputs * w + b, w and b starting at zero.
Regressor build_linear(graph::Builder& b, int64_t features, int64_t outputs);

// A classifier of bags of ids (embedding_bag_model.cc): `ids` ids per example ("ids", i64 [?, ids])
// looked up in a `rows` x `width` table ("embedding/table", normal 0.05), averaged, and a dense layer to
// `classes` logits; its Classifier::images is the ids.
struct EmbeddingBagOptions {
  int64_t rows = 1'000'000, width = 64, ids = 8, classes = 10;
};
Classifier build_embedding_bag(graph::Builder& b, const EmbeddingBagOptions& options);

// A language model: token ids [?, context] in, the next tokens' logits [? x context, vocab] out.
struct LanguageModel {
  graph::ValueRef inputs;  // placeholder "inputs", i64
  graph::ValueRef logits;
};
// A bigram model (bigram_model.cc): the logits of each next token a row of a [vocab, vocab] table.
LanguageModel build_bigram(graph::Builder& b, int64_t vocab, int64_t context);

// A GPT-2-style decoder (gpt_model.cc): `layers` pre-norm blocks of causal self-attention over
// `heads` heads and a GELU MLP of 4 x `embedding`, learned positions, the output projection tied to the
// token embedding; weights as nanoGPT initialises them (normal 0.02, the residual projections scaled
// by 1 / sqrt(2 layers)). Logits [? x context, vocab].
struct GptOptions {
  int64_t layers = 4, heads = 4, embedding = 128, context = 64, vocab = 84;
  double dropout = 0.0;  // > 0: the rate, and the placeholder ops::kExampleKeysPlaceholder keys the masks
  // ScaledDotProductAttention, or the composite (batched products, a -inf mask, Softmax), which a
  // dropout on the attention weights needs.
  bool fused_attention = true;
  graph::DType dtype = graph::DType::f32;
};
LanguageModel build_gpt(graph::Builder& b, const GptOptions& options);

// The builder of the classifier called `name` ("mlp", "cnn", "resnet20", "resnet18", "resnet50",
// "resnet101", "vgg16", "inception_v3"), or nullptr.
using ModelBuilder = Classifier (*)(graph::Builder&);
ModelBuilder model_builder(std::string_view name);
// "mlp, cnn, resnet20, ...": for messages.
std::string model_names();

// A fully connected layer x * w + b (w Glorot-uniform, b zeros), ReLU when `relu`, in scope `name`.
graph::ValueRef dense(graph::Builder& b, const char* name, graph::ValueRef x, int64_t in, int64_t out, bool relu,
                      graph::DType dtype = graph::DType::f32);

}  // namespace mirra::examples
