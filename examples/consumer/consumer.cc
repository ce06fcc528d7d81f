// A program outside mirra's tree that uses only its installed API: it builds the README's classifier
// (two dense layers, sized here for Fashion-MNIST), trains it for a few steps with MirroredStrategy
// over two logical CPU devices, evaluates it on the test split, and writes it as a model file that
// the installed `mirra eval` reads. The last line of stdout is JSON: {"mirra": ..., "test_accuracy": ...}.
//
//   consumer MODEL_OUT [STEPS] [DATA_DIR]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "graph/version.h"
#include "ops/ops.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/session.h"
#include "runtime/training/trainer.h"
#include "serialization/model_file.h"
#include "strategies/strategy.h"

using namespace mirra;

namespace {

constexpr uint64_t kSeed = 7;

struct Classifier {
  graph::ValueRef images;
  ops::ClassifierObjective objective;
};

// images [?, 28, 28, 1] -> dense 64 + ReLU -> dense 10, with the classifier objective.
Classifier build_classifier(graph::Builder& b) {
  Classifier model;
  model.images = ops::placeholder(b, "images", graph::DType::f32, {-1, 28, 28, 1});
  graph::ValueRef x = ops::reshape(b, model.images, {-1, 784});
  {
    auto scope = b.scope("fc1");
    auto w = ops::variable(b, "w", {784, 64}, ops::Initializer::he_normal());
    auto bias = ops::variable(b, "b", {64});
    x = ops::relu(b, ops::bias_add(b, ops::matmul(b, x, w), bias));
  }
  {
    auto scope = b.scope("fc2");
    auto w = ops::variable(b, "w", {64, 10}, ops::Initializer::glorot_uniform());
    auto bias = ops::variable(b, "b", {10});
    x = ops::bias_add(b, ops::matmul(b, x, w), bias);
  }
  model.objective = ops::classifier_objective(b, x);
  return model;
}

// Returns the test accuracy.
graph::Expected<double> train_and_save(const std::string& path, int64_t steps, const std::string& data) {
  const ops::Optimizer optimizer = ops::Optimizer::momentum_sgd(0.05, 0.9);
  strategies::TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), kSeed);
  const Classifier model = build_classifier(b);
  MIRRA_RETURN_IF_ERROR(b.status());
  MIRRA_ASSIGN_OR_RETURN(const ops::TrainOp train, ops::minimize(b, model.objective.loss, optimizer));
  program.signature = {.features = "images",
                       .labels = program.graph.node(model.objective.labels.node).name,
                       .loss = model.objective.loss,
                       .correct = model.objective.correct,
                       .train = train.train,
                       .learning_rate = train.learning_rate};
  program.variables_and_gradients = train.variables_and_gradients;
  program.loss_gradient = train.loss_gradient;
  program.step_state = train.step_state;

  strategies::StrategyConfig config{.strategy = "mirrored"};
  for (const char* device : {"cpu:0", "cpu:1"}) {
    MIRRA_ASSIGN_OR_RETURN(const graph::DeviceId id, graph::DeviceId::parse(device));
    config.devices.push_back(id);
  }
  MIRRA_ASSIGN_OR_RETURN(const auto strategy, strategies::make_strategy(config));
  MIRRA_ASSIGN_OR_RETURN(const strategies::TrainingProgram mirrored, strategy->distribute(program));

  using runtime::data::Split;
  const runtime::data::ClassifierFeeds feeds{.images = program.signature.features, .labels = program.signature.labels};
  MIRRA_ASSIGN_OR_RETURN(const auto train_data,
                         runtime::data::fashion_mnist_dataset(data, Split::train, {.batch_size = 128, .seed = kSeed}, feeds));
  MIRRA_ASSIGN_OR_RETURN(const auto test_data,
                         runtime::data::fashion_mnist_dataset(data, Split::test, {.batch_size = 1000, .shuffle = false}, feeds));
  runtime::Session session(mirrored.graph, ops::kernels());
  runtime::training::Trainer trainer(session, mirrored.signature, {.max_steps = steps});
  MIRRA_RETURN_IF_ERROR(trainer.fit(train_data).status());
  MIRRA_ASSIGN_OR_RETURN(const runtime::training::Evaluation evaluation, trainer.evaluate(test_data));

  // The model file: the model and its objective (no training ops), the trained weights under their
  // replica-free names (replica 0's copy; the replicas are equal), and the signature.
  serialization::Model file;
  graph::Builder fb(file.graph, ops::registry(), kSeed);
  const Classifier saved = build_classifier(fb);
  MIRRA_RETURN_IF_ERROR(fb.status());
  file.signature = {.features = "images",
                    .labels = file.graph.node(saved.objective.labels.node).name,
                    .loss = saved.objective.loss,
                    .metrics = {{"correct", saved.objective.correct}},
                    .optimizer = {.kind = optimizer.kind, .hyper_parameters = ops::optimizer_hyper_parameters(optimizer)}};
  std::map<std::string, std::string> trained_name;  // replica-free name -> the session's variable
  for (const graph::Node& node : mirrored.graph.nodes()) {
    int replica = -1;
    const std::string name(strategies::replica_free_name(node.name, &replica));
    if (node.op == "Variable" && replica <= 0) trained_name[name] = node.name;
  }
  for (const graph::Node& node : file.graph.nodes()) {
    if (node.op != "Variable") continue;
    const auto value = session.read_variable(trained_name[node.name]);
    if (!value) return graph::internal_error("the trained program has no variable '" + node.name + "'");
    file.weights.push_back({node.name, runtime::to_tensor_value(*value)});
  }
  file.metadata.description = "mirra consumer example: dense 64 + ReLU, dense 10";
  MIRRA_RETURN_IF_ERROR(serialization::save_model(file, path));
  return evaluation.accuracy.value_or(0.0);  // a classifier's
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s MODEL_OUT [STEPS] [DATA_DIR]\n", argv[0]);
    return 2;
  }
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 200;
  const std::string data = argc > 3 ? argv[3] : runtime::data::kFashionMnistDir;
  const graph::Expected<double> test_accuracy = train_and_save(argv[1], steps, data);
  if (!test_accuracy.ok()) {
    std::fprintf(stderr, "consumer: %s\n", test_accuracy.status().to_string().c_str());
    return 1;
  }
  std::printf("{\"mirra\": \"%s\", \"headers\": \"%s\", \"steps\": %lld, \"test_accuracy\": %.6f}\n", version(),
              MIRRA_VERSION_STRING, static_cast<long long>(steps), *test_accuracy);
  return 0;
}
