// ResNet-20 (examples/resnet_model.cc), ResNet-18 and ResNet-50 (resnet_imagenet_model.cc) against
// PyTorch in float64: the loss and the gradient of every trained variable for one batch, batch
// normalisation in training mode, within 1e-6 relative. The references are
// tests/strategies/reference/resnet*_torch.json, written once by the scripts beside them, which state
// the networks (narrow, on small images), the weights' and inputs' formulas, and the padding. At
// ImageNet's shapes, the parameters and multiply-adds of these and of ResNet-101, VGG-16 and
// Inception V3 (the models of mirra simulate's published figures) against torchvision's.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>

#include "examples/models.h"
#include "graph/gradients.h"
#include "ops/fusion.h"
#include "ops/model_cost.h"
#include "tests/golden_file.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int64_t kWidth = 4, kSize = 8, kBatch = 5, kClasses = 10;

// A narrow network on `image`-shaped inputs: its loss and every trained variable's gradient for the
// script's weights and batch against the reference file's.
// With `fused`, after the fusion passes training programs take (the padding folded into the
// convolutions, batch normalisation fused with its ReLU and residual sum).
void check_against_reference(const std::string& reference_file, const std::vector<int64_t>& image,
                             const std::function<examples::Classifier(graph::Builder&)>& build, bool fused = false) {
  std::ifstream file(mirra::test::source_file("tests/strategies/reference/" + reference_file));
  REQUIRE(file.good());
  const nlohmann::json reference = nlohmann::json::parse(file);

  graph::Graph g;
  graph::Builder b(g, ops::registry(), 1);
  const examples::Classifier model = build(b);
  const ops::ClassifierObjective objective = ops::classifier_objective(b, model.logits);
  std::map<std::string, graph::ValueRef> trained;  // by name: sorted, as the script numbers them
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Variable" && node.name.find("moving_") == std::string::npos) trained[node.name] = {node.id, 0};
  }
  std::vector<graph::ValueRef> variables;
  for (const auto& [name, value] : trained) variables.push_back(value);
  auto gradients = graph::gradients(b, objective.loss, variables);
  REQUIRE_MESSAGE(gradients.ok(), gradients.status().to_string());
  REQUIRE(trained.size() == reference["gradients"].size());
  if (fused) {
    CHECK(ops::fold_padding_into_convolutions(g) > 0);
    CHECK(ops::fuse_for_training(g) > 0);
  }

  runtime::Session session(g, ops::kernels(), {.threads = 2});
  assign_reference_weights(session, g, trained);
  const int64_t pixels = image[0] * image[1] * image[2];
  std::vector<double> images;
  for (int64_t i = 0; i < kBatch * pixels; ++i) images.push_back(std::sin(0.37 * static_cast<double>(i)));
  std::vector<int64_t> labels;
  for (int64_t e = 0; e < kBatch; ++e) labels.push_back(3 * e % kClasses);
  std::vector<graph::ValueRef> fetches = {objective.loss};
  fetches.insert(fetches.end(), gradients->begin(), gradients->end());
  auto out = session.run(
      {{"images", runtime::Tensor::from<double>({kBatch, image[0], image[1], image[2]}, std::span<const double>(images))},
       {"labels", runtime::Tensor::from<int64_t>({kBatch}, std::span<const int64_t>(labels))}},
      fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].values<double>()[0] == doctest::Approx(reference["loss"].get<double>()).epsilon(1e-9));
  // A gradient that is zero but for rounding is held to the network's scale: ResNet-50's stem's beta,
  // whose every path meets a 1x1 convolution and batch normalisation, which give the stem's output a
  // gradient that sums to zero over the positions of each channel.
  double largest = 0;
  for (const auto& [name, values] : reference["gradients"].items()) {
    for (const double v : values) largest = std::max(largest, std::abs(v));
  }
  size_t i = 1;
  for (const auto& [name, value] : trained) {
    const std::span<const double> got = (*out)[i++].values<double>();
    check_within(name, std::vector<double>(got.begin(), got.end()), reference["gradients"][name].get<std::vector<double>>(),
                 1e-6, 1e-9 * largest);
  }
}

TEST_CASE("ResNet20.loss_and_every_gradient_match_pytorch_in_float64") {
  check_against_reference("resnet20_torch.json", {kSize, kSize, 1}, [](graph::Builder& b) {
    return examples::build_resnet20(b, {.dtype = graph::DType::f64, .width = kWidth, .image = {kSize, kSize, 1}, .classes = kClasses});
  });
}

// At ImageNet's shapes, the trainable parameters are torchvision's (its models' parameter counts;
// Inception V3's without the auxiliary classifier), and the forward pass's multiply-adds those of
// the architecture's formula (sum over convolutions of output elements x kernel area x input
// channels, plus the dense layers): ResNet-18's 1.81 G and ResNet-50's 4.09 G exactly, and
// ResNet-101's, VGG-16's and Inception V3's as torchvision's model tables round them (7.80 G, 15.47 G
// and 5.71 G).
TEST_CASE("ImageNet_classifiers.parameters_and_multiply_adds_are_torchvisions") {
  const auto count = [](examples::Classifier (*build)(graph::Builder&), int64_t parameters, double multiply_adds,
                        double tolerance, int64_t products) {
    graph::Graph g;
    graph::Builder b(g, ops::registry(), 1);
    const examples::Classifier model = build(b);
    const ops::ClassifierObjective objective = ops::classifier_objective(b, model.logits);
    REQUIRE(b.status().ok());
    int64_t trainable = 0;
    for (const graph::Node& node : g.nodes()) {
      if (node.op == "Variable" && *node.attrs.get<bool>("trainable")) trainable += *node.outputs[0].shape.num_elements();
    }
    CHECK(trainable == parameters);
    const auto cost = ops::forward_cost(g, std::span(&objective.loss.node, 1), ops::registry());
    REQUIRE(cost.ok());
    CHECK(static_cast<double>(cost->multiply_adds) == doctest::Approx(multiply_adds).epsilon(tolerance));
    CHECK(cost->matrix_products == products);
  };
  count(examples::build_resnet18, 11'689'512, 1'814'073'344, 1e-12, 1);
  count(examples::build_resnet50, 25'557'032, 4'089'184'256, 1e-12, 1);
  count(examples::build_resnet101, 44'549'160, 7.80e9, 0.005, 1);
  count(examples::build_vgg16, 138'357'544, 15.47e9, 0.005, 3);
  count(examples::build_inception_v3, 23'834'568, 5.71e9, 0.005, 1);
}

// torchvision's ResNet-18 and ResNet-50 (symmetric padding, max-pooling, projection shortcuts,
// bottlenecks with their stride on the 3x3 convolution), narrow, on 32x32x3 images; as built, and
// after the fusion passes (their padding then EXPLICIT in the convolutions).
TEST_CASE("ResNet18_and_ResNet50.loss_and_every_gradient_match_pytorch_in_float64") {
  const std::vector<int64_t> image = {32, 32, 3};
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    check_against_reference("resnet18_torch.json", image, [&](graph::Builder& b) {
      return examples::build_resnet18(b, {.dtype = graph::DType::f64, .width = 4, .image = image, .classes = kClasses});
    }, fused);
    check_against_reference("resnet50_torch.json", image, [&](graph::Builder& b) {
      return examples::build_resnet50(b, {.dtype = graph::DType::f64, .width = 2, .image = image, .classes = kClasses});
    }, fused);
  }
}

// The narrow ResNet-20 in float64 as a training program (momentum SGD, its moving statistics updated).
TrainingProgram resnet_program() {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), 3);
  const examples::Classifier model =
      examples::build_resnet20(b, {.dtype = graph::DType::f64, .width = kWidth, .image = {kSize, kSize, 1}, .classes = kClasses});
  const ops::ClassifierObjective objective = ops::classifier_objective(b, model.logits);
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.05, 0.9), {.state_updates = model.state_updates});
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.loss = objective.loss, .correct = objective.correct, .train = train->train,
                       .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

// Losses of 20 steps on batches of 61 (images with a mean of 3 in every channel) and every variable
// after them, replica 0's.
std::pair<std::vector<double>, std::map<std::string, std::vector<double>>> train_resnet(const TrainingProgram& program,
                                                                                       const std::string& strategy, int replicas,
                                                                                       bool sync) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas), .sync_batch_norm = sync});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  runtime::Random rng(21);
  std::vector<double> losses;
  for (int step = 0; step < 20; ++step) {
    std::vector<double> images(61 * kSize * kSize);
    std::vector<int64_t> labels(61);
    for (double& v : images) v = 3 + 2 * rng.uniform() - 1;
    for (int64_t& l : labels) l = static_cast<int64_t>(rng.below(kClasses));
    auto out = session.run({{"images", runtime::Tensor::from<double>({61, kSize, kSize, 1}, std::span<const double>(images))},
                            {"labels", runtime::Tensor::from<int64_t>({61}, std::span<const int64_t>(labels))}},
                           {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    losses.push_back((*out)[0].values<double>()[0]);
  }
  REQUIRE(runtime::training::synchronize_on_read(session, distributed->signature).ok());
  std::map<std::string, std::vector<double>> variables;
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0) variables[plain] = value;
  }
  return {losses, variables};
}

TEST_CASE("ResNet20.with_synchronised_batch_norm_replicas_train_as_one_device") {
  const TrainingProgram program = resnet_program();
  // Over 2 and 4 replicas as the runner trains it: every batch normalisation fused with its ReLU, or
  // with the residual sum and its ReLU, forward and backward (19 of each).
  TrainingProgram fused = resnet_program();
  REQUIRE(ops::fuse_batch_norm_activation(fused.graph) == 19);
  REQUIRE(ops::fuse_batch_norm_grad_activation(fused.graph) == 19);
  const auto [reference_losses, reference] = train_resnet(program, "one_device", 1, false);
  for (int replicas = 1; replicas <= 4; ++replicas) {
    CAPTURE(replicas);
    const auto [losses, variables] = train_resnet(replicas % 2 == 0 ? fused : program, "mirrored", replicas, true);
    for (size_t step = 0; step < losses.size(); ++step) CHECK(losses[step] == doctest::Approx(reference_losses[step]).epsilon(1e-9));
    for (const auto& [name, value] : reference) check_within(name, variables.at(name), value, 1e-8);
  }
  // Per replica they do not.
  const auto [per_replica, unused] = train_resnet(program, "mirrored", 2, false);
  CHECK(std::abs(per_replica.back() - reference_losses.back()) > 1e-6);
}

}  // namespace
}  // namespace mirra::strategies::test
