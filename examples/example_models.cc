// build_example_model: model + objective in one graph, the signature, and initial weights computed by
// running each variable's initialiser once.
#include "examples/example_models.h"

#include "examples/classifier_training.h"
#include "examples/models.h"
#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::examples {

const std::vector<ExampleModel>& example_models() {
  static const std::vector<ExampleModel> models = {
      {"mlp", "MLP 784-256-128-10 with ReLU, for 28x28x1 images in 10 classes"},
      {"cnn", "CNN: conv 5x5x32, max-pool, conv 5x5x64, max-pool, dense 1024, dense 10 (the TensorFlow tutorial's)"},
      {"resnet20", "ResNet-20 (He et al.'s CIFAR network: 3 stages of 3 basic blocks at 16, 32, 64 channels, batch "
                   "normalisation, option-A shortcuts), for 28x28x1 images in 10 classes"},
      {"resnet18", "ResNet-18 (torchvision's: 7x7 stem, max-pool, 4 stages of 2 basic blocks at 64-512 channels, "
                   "projection shortcuts), for 224x224x3 images in 1000 classes; 11.7M parameters"},
      {"resnet50", "ResNet-50 (torchvision's v1.5: 7x7 stem, max-pool, 3-4-6-3 bottleneck blocks to 2048 channels, "
                   "projection shortcuts), for 224x224x3 images in 1000 classes; 25.6M parameters"},
      {"resnet101", "ResNet-101 (torchvision's: as ResNet-50 with 3-4-23-3 bottleneck blocks), for 224x224x3 images in "
                    "1000 classes; 44.5M parameters"},
      {"vgg16", "VGG-16 (configuration D: 13 3x3 convolutions with bias, 5 max-pools, dense 4096-4096-1000), for 224x224x3 "
                "images in 1000 classes; 138.4M parameters"},
      {"inception_v3", "Inception V3 (torchvision's, without the auxiliary classifier), for 299x299x3 images in 1000 "
                       "classes; 23.8M parameters"},
      {"linear", "Linear regression: inputs [features] -> targets [outputs] (--features, --outputs), mean squared error"},
      {"embedding_bag", "Classifier of bags of ids: --context ids per example looked up in a --vocab x --embedding table "
                        "(1,000,000 x 64, 8 ids by default), averaged, dense to 10 classes"},
      {"bigram", "Bigram language model: token ids [context] -> the next tokens (--vocab, --context), cross-entropy per token"},
      {"gpt", "GPT-2-style decoder: --layers, --heads, --embedding, --context, --vocab (gpt-tiny's by default)"},
      {"gpt-tiny", "GPT: 4 layers, 4 heads, 128 wide, context 64, 84 characters (0.8M parameters; for CPUs)"},
      {"gpt-char", "GPT: 6 layers, 6 heads, 384 wide, context 256, 84 characters (nanoGPT's shakespeare_char shape, 10.7M)"},
      {"gpt2-small", "GPT-2 small: 12 layers, 12 heads, 768 wide, context 1024, 50,257 tokens (124M parameters)"},
  };
  return models;
}

namespace {

// A preset's shape, with the options' overrides.
GptOptions gpt_options(std::string_view name, const ExampleModelOptions& options) {
  GptOptions gpt;  // gpt-tiny's; 84 tokens: the characters of scripts/prepare_shakespeare.py
  if (name == "gpt-char") gpt = {.layers = 6, .heads = 6, .embedding = 384, .context = 256, .vocab = 84};
  if (name == "gpt2-small") gpt = {.layers = 12, .heads = 12, .embedding = 768, .context = 1024, .vocab = 50257};
  gpt.layers = options.layers.value_or(gpt.layers);
  gpt.heads = options.heads.value_or(gpt.heads);
  gpt.embedding = options.embedding.value_or(gpt.embedding);
  gpt.context = options.context.value_or(gpt.context);
  gpt.vocab = options.vocab.value_or(gpt.vocab);
  gpt.dropout = options.dropout;
  return gpt;
}

// nanoGPT's: AdamW (betas 0.9 and 0.99, epsilon 1e-8), learning rate 1e-3, weight decay 0.1 on the
// matrices and embeddings only, gradients clipped to a global norm of 1.
ops::Optimizer gpt_optimizer() {
  ops::Optimizer o = ops::Optimizer::adamw(1e-3, 0.1);
  o.beta2 = 0.99;
  o.epsilon = 1e-8;
  o.exclude_from_weight_decay = {"bias", "gamma", "beta"};
  o.clip_global_norm = 1.0;
  return o;
}

// The classifier `name` in `options.dtype`: the ResNets in f32 or f64, the others in f32 only.
graph::Expected<Classifier> build_classifier(graph::Builder& b, std::string_view name, const ExampleModelOptions& options) {
  const graph::DType dtype = options.dtype;
  if (dtype == graph::DType::f32 && name == "embedding_bag") {
    const EmbeddingBagOptions bag{.rows = options.vocab.value_or(1'000'000),
                                  .width = options.embedding.value_or(64),
                                  .ids = options.context.value_or(8)};
    if (bag.rows < 1 || bag.width < 1 || bag.ids < 1) return graph::invalid_argument("an embedding bag needs rows, a width and ids");
    return build_embedding_bag(b, bag);
  }
  if (dtype == graph::DType::f32) return model_builder(name)(b);
  if (dtype != graph::DType::f64) {
    return graph::invalid_argument("the ResNets are built in f32 or f64, not " + std::string(graph::dtype_name(dtype)) +
                                   " (16-bit training is a run's mixed_precision)");
  }
  if (name == "resnet20") return build_resnet20(b, {.dtype = dtype});
  if (name == "resnet18") return build_resnet18(b, {.dtype = dtype});
  if (name == "resnet50") return build_resnet50(b, {.dtype = dtype});
  if (name == "resnet101") return build_resnet101(b, {.dtype = dtype});
  return graph::invalid_argument("example model '" + std::string(name) + "' is built in f32 only; f64 is for the ResNets");
}

}  // namespace

graph::Expected<serialization::Model> build_example_model(std::string_view name, uint64_t seed,
                                                          const ExampleModelOptions& options) {
  const ExampleModel* example = nullptr;
  for (const ExampleModel& m : example_models()) {
    if (m.name == name) example = &m;
  }
  if (example == nullptr) {
    return graph::invalid_argument("example model '" + std::string(name) + "' is not known (" + model_names() + ")");
  }
  serialization::Model model;
  graph::Builder b(model.graph, ops::registry(), seed);
  const ops::Optimizer optimizer = benchmark_optimizer();
  model.signature.optimizer = {.kind = optimizer.kind, .hyper_parameters = ops::optimizer_hyper_parameters(optimizer)};
  if (name == "linear") {
    if (options.features < 1 || options.outputs < 1) {
      return graph::invalid_argument("linear regression needs at least one feature and one output");
    }
    const Regressor regressor = build_linear(b, options.features, options.outputs);
    const ops::RegressionObjective objective = ops::regression_objective(b, regressor.predictions);
    MIRRA_RETURN_IF_ERROR(b.status());
    model.signature.features = model.graph.node(regressor.inputs.node).name;
    model.signature.labels = model.graph.node(objective.targets.node).name;
    model.signature.loss = objective.loss;
  } else if (name == "bigram" || name.starts_with("gpt")) {
    LanguageModel lm;
    int64_t context = 0;
    if (name == "bigram") {
      const int64_t vocab = options.vocab.value_or(256);
      context = options.context.value_or(64);
      if (vocab < 1 || context < 1) return graph::invalid_argument("a language model needs a vocabulary and a context");
      lm = build_bigram(b, vocab, context);
    } else {
      const GptOptions gpt = gpt_options(name, options);
      context = gpt.context;
      lm = build_gpt(b, gpt);
      model.signature.optimizer = {.kind = "adamw", .hyper_parameters = ops::optimizer_hyper_parameters(gpt_optimizer())};
    }
    const graph::ValueRef targets = ops::placeholder(b, "targets", graph::DType::i64, {-1, context});
    auto scope = b.scope("objective");
    const graph::ValueRef loss =
        ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, lm.logits, ops::reshape(b, targets, {-1})).loss);
    MIRRA_RETURN_IF_ERROR(b.status());
    // The tokens the loss averages over (a sum), and the perplexity: the exponential of the mean
    // cross-entropy per token over an epoch or an evaluation.
    const graph::ValueRef tokens = ops::reduce_sum(b, ops::cast(b, ops::equal(b, targets, targets), graph::DType::f32));
    MIRRA_RETURN_IF_ERROR(b.status());
    model.signature.features = model.graph.node(lm.inputs.node).name;
    model.signature.labels = model.graph.node(targets.node).name;
    model.signature.loss = loss;
    model.signature.metrics = {{.name = "perplexity", .value = loss, .reduction = "exp_mean"},
                               {.name = "tokens", .value = tokens, .reduction = "sum"}};
  } else {
    MIRRA_ASSIGN_OR_RETURN(const Classifier classifier, build_classifier(b, name, options));
    const ops::ClassifierObjective objective =
        ops::classifier_objective(b, classifier.logits, {.label_smoothing = options.label_smoothing});
    MIRRA_RETURN_IF_ERROR(b.status());
    model.signature.features = model.graph.node(classifier.images.node).name;
    model.signature.labels = model.graph.node(objective.labels.node).name;
    model.signature.loss = objective.loss;
    model.signature.metrics = {{"correct", objective.correct}};
    for (const graph::NodeId update : classifier.state_updates) model.signature.state_updates.push_back(model.graph.node(update).name);
  }
  model.metadata.description = example->description;

  std::vector<graph::ValueRef> variables;
  for (const graph::Node& node : model.graph.nodes()) {
    if (node.op == "Variable") variables.push_back({node.id, 0});
  }
  runtime::Session session(model.graph, ops::kernels(), {.deterministic = true});
  MIRRA_ASSIGN_OR_RETURN(const std::vector<runtime::Tensor> values, session.run({}, variables));
  for (size_t i = 0; i < variables.size(); ++i) {
    model.weights.push_back({model.graph.node(variables[i].node).name, runtime::to_tensor_value(values[i])});
  }
  return model;
}

}  // namespace mirra::examples
