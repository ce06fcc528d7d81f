// The loss every strategy reports, and the variables it trains, equal one device's whatever the loss
// averages: per-example losses [B], per-token losses [B, T] (a language model's), per-output errors
// [B, k] (a regression's), and a mean plus an L2 weight decay that does not depend on the batch (as
// Keras's kernel_regularizer adds it), on batches that split unevenly and leave replicas empty. Losses
// of other shapes are refused, naming the node and saying what is supported.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;

constexpr int64_t kTokens = 3, kFeatures = 4, kClasses = 5, kOutputs = 2;

// A model over f64 inputs "images" [?, ...] and targets "labels": its loss and a batch-dependent count.
struct Model {
  ValueRef loss, correct;
};

struct LossCase {
  const char* name;
  // The batch inputs' shapes after the batch dim, the labels' dtype, and the model built on them.
  std::vector<int64_t> features, labels;
  DType label_dtype;
  std::function<Model(graph::Builder&, ValueRef images, ValueRef labels)> model;
};

ValueRef weights(graph::Builder& b, const char* name, int64_t in, int64_t out) {
  return ops::variable(b, name, {in, out}, ops::Initializer::glorot_uniform(), DType::f64);
}

// Every prediction counted as correct when it is the label: enough for the count's aggregation.
ValueRef correct_count(graph::Builder& b, ValueRef logits, ValueRef labels) {
  return ops::reduce_sum(b, ops::cast(b, ops::equal(b, ops::argmax(b, logits, 1), labels), DType::f32));
}

const LossCase kCases[] = {
    {"per-example cross-entropy [B]", {kFeatures}, {}, DType::i64,
     [](graph::Builder& b, ValueRef x, ValueRef labels) {
       const ValueRef logits = ops::matmul(b, x, weights(b, "w", kFeatures, kClasses));
       const ValueRef losses = ops::sparse_softmax_cross_entropy_with_logits(b, logits, labels).loss;
       return Model{ops::reduce_mean(b, losses), correct_count(b, logits, labels)};
     }},
    {"per-token cross-entropy [B, T]", {kTokens, kFeatures}, {kTokens}, DType::i64,
     [](graph::Builder& b, ValueRef x, ValueRef labels) {
       const ValueRef logits = ops::matmul(b, ops::reshape(b, x, {-1, kFeatures}), weights(b, "w", kFeatures, kClasses));
       const ValueRef flat_labels = ops::reshape(b, labels, {-1});
       const ValueRef losses =
           ops::sparse_softmax_cross_entropy_with_logits(b, logits, flat_labels).loss;
       return Model{ops::reduce_mean(b, ops::reshape(b, losses, {-1, kTokens})), correct_count(b, logits, flat_labels)};
     }},
    {"squared error [B, k]", {kFeatures}, {kOutputs}, DType::f64,
     [](graph::Builder& b, ValueRef x, ValueRef targets) {
       const ValueRef predictions = ops::matmul(b, x, weights(b, "w", kFeatures, kOutputs));
       const ValueRef error = ops::square(b, ops::sub(b, predictions, targets));
       return Model{ops::reduce_mean(b, error), ops::cast(b, ops::reduce_sum(b, ops::zeros_like(b, error)), DType::f32)};
     }},
    {"cross-entropy [B] + 0.01 * L2", {kFeatures}, {}, DType::i64,
     [](graph::Builder& b, ValueRef x, ValueRef labels) {
       const ValueRef w = weights(b, "w", kFeatures, kClasses);
       const ValueRef logits = ops::matmul(b, x, w);
       const ValueRef losses = ops::sparse_softmax_cross_entropy_with_logits(b, logits, labels).loss;
       const ValueRef decay = ops::mul(b, ops::scalar_of(b, 0.01, w), ops::reduce_sum(b, ops::square(b, w)));
       return Model{ops::add(b, ops::reduce_mean(b, losses), decay), correct_count(b, logits, labels)};
     }},
};

TrainingProgram build(const LossCase& c) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/5);
  std::vector<int64_t> features = {-1}, labels = {-1};
  features.insert(features.end(), c.features.begin(), c.features.end());
  labels.insert(labels.end(), c.labels.begin(), c.labels.end());
  const ValueRef images = ops::placeholder(b, "images", DType::f64, graph::Shape(features));
  const ValueRef targets = ops::placeholder(b, "labels", c.label_dtype, graph::Shape(labels));
  const Model model = c.model(b, images, targets);
  auto train = ops::minimize(b, model.loss, ops::Optimizer::momentum_sgd(0.1, 0.9));
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.loss = model.loss, .correct = model.correct, .train = train->train, .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

Batch batch_of(const LossCase& c, int64_t size, runtime::Random& rng) {
  std::vector<int64_t> features = {size}, labels = {size};
  features.insert(features.end(), c.features.begin(), c.features.end());
  labels.insert(labels.end(), c.labels.begin(), c.labels.end());
  const runtime::TensorShape feature_shape(features), label_shape(labels);
  std::vector<double> x(static_cast<size_t>(feature_shape.num_elements()));
  for (double& v : x) v = 2 * rng.uniform() - 1;
  Batch batch{runtime::Tensor::from<double>(feature_shape, std::span<const double>(x)), {}};
  if (c.label_dtype == DType::i64) {
    std::vector<int64_t> l(static_cast<size_t>(label_shape.num_elements()));
    for (int64_t& v : l) v = static_cast<int64_t>(rng.below(kClasses));
    batch.labels = runtime::Tensor::from<int64_t>(label_shape, std::span<const int64_t>(l));
  } else {
    std::vector<double> l(static_cast<size_t>(label_shape.num_elements()));
    for (double& v : l) v = rng.uniform();
    batch.labels = runtime::Tensor::from<double>(label_shape, std::span<const double>(l));
  }
  return batch;
}

// Losses, correct counts and variables over `batches` under `strategy` on `replicas` cpu devices.
struct Trained {
  std::vector<double> losses, correct;
  std::map<std::string, std::vector<double>> variables;
};

Trained train(const TrainingProgram& program, const std::string& strategy, int replicas, const std::vector<Batch>& batches) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  Trained out;
  for (const Batch& batch : batches) {
    auto step = session.run(feeds(*distributed, batch), {distributed->signature.loss, distributed->signature.correct},
                            {distributed->signature.train});
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    out.losses.push_back((*step)[0].values<double>()[0]);
    out.correct.push_back((*step)[1].values<float>()[0]);
  }
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string_view plain = replica_free_name(name, &replica);
    if (replica <= 0 && !plain.starts_with("optimizer/")) out.variables[std::string(plain)] = value;
  }
  return out;
}

TEST_CASE("Strategies.report_and_train_every_loss_shape_as_one_device") {
  for (const LossCase& c : kCases) {
    const std::string loss = c.name;
    CAPTURE(loss);
    const TrainingProgram program = build(c);
    runtime::Random rng(11);
    std::vector<Batch> batches;
    for (const int64_t size : {8, 5, 2, 7}) batches.push_back(batch_of(c, size, rng));  // 2 over 3: one share empty
    const Trained reference = train(program, "one_device", 1, batches);
    for (const char* strategy : {"mirrored", "central_storage"}) {
      for (int replicas = 1; replicas <= 3; ++replicas) {
        const std::string strategy_name = strategy;
        CAPTURE(strategy_name);
        CAPTURE(replicas);
        const Trained got = train(program, strategy, replicas, batches);
        for (size_t step = 0; step < batches.size(); ++step) {
          CAPTURE(step);
          CHECK(got.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-12));
          CHECK(got.correct[step] == reference.correct[step]);
        }
        for (const auto& [name, value] : reference.variables) check_within(name, got.variables.at(name), value, 1e-12);
      }
    }
  }
}

TEST_CASE("Strategies.refuse_losses_they_cannot_report_naming_the_node") {
  struct Refused {
    const char* name;
    std::function<ValueRef(graph::Builder&, ValueRef losses)> loss;
    const char* message;
  };
  const Refused refused[] = {
      {"a product of two batch means",
       [](graph::Builder& b, ValueRef losses) { return ops::mul(b, ops::reduce_mean(b, losses), ops::reduce_mean(b, losses)); },
       "the loss's node 'Mul' (Mul) combines two values that both depend on the batch"},
      {"a sum over the batch", [](graph::Builder& b, ValueRef losses) { return ops::reduce_sum(b, losses); },
       "the loss's node 'ReduceSum' (ReduceSum) depends on the batch"},
      {"a mean over some axes only",
       [](graph::Builder& b, ValueRef losses) {
         return ops::reduce_sum(b, ops::reduce_mean(b, ops::reshape(b, losses, {-1, 1}), {0}));
       },
       "the loss's node 'ReduceSum' (ReduceSum) depends on the batch"},
      {"a division by a batch mean",
       [](graph::Builder& b, ValueRef losses) {
         return ops::div(b, ops::scalar_of(b, 1.0, losses), ops::reduce_mean(b, losses));
       },
       "the loss's node 'Div' (Div) divides by a value that depends on the batch"},
  };
  for (const Refused& r : refused) {
    const std::string shape = r.name;
    CAPTURE(shape);
    TrainingProgram program;
    graph::Builder b(program.graph, ops::registry(), /*seed=*/5);
    const ValueRef images = ops::placeholder(b, "images", DType::f64, {-1, kFeatures});
    const ValueRef labels = ops::placeholder(b, "labels", DType::i64, {-1});
    const ValueRef logits = ops::matmul(b, images, weights(b, "w", kFeatures, kClasses));
    const ValueRef losses = ops::sparse_softmax_cross_entropy_with_logits(b, logits, labels).loss;
    const ValueRef loss = r.loss(b, losses);
    auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1));
    REQUIRE_MESSAGE(train.ok(), train.status().to_string());
    program.signature = {.loss = loss, .correct = correct_count(b, logits, labels), .train = train->train,
                         .learning_rate = train->learning_rate};
    program.variables_and_gradients = train->variables_and_gradients;
    program.loss_gradient = train->loss_gradient;
    program.step_state = train->step_state;
    auto made = make_strategy({.strategy = "mirrored", .devices = devices_of(graph::DeviceKind::cpu, 2)});
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(program);
    REQUIRE_FALSE(distributed.ok());
    CHECK(distributed.status().code() == graph::StatusCode::invalid_argument);
    CHECK_MESSAGE(distributed.status().message().find(r.message) != std::string::npos, distributed.status().message());
    CHECK(distributed.status().message().find("a loss is a mean over the batch") != std::string::npos);
  }
}

}  // namespace
}  // namespace mirra::strategies::test
