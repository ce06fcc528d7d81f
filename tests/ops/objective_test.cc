// Objectives beyond the plain cross-entropy: label smoothing (the loss and its gradient against
// TensorFlow's definition, -sum((1 - s) y + s / K) log softmax, written as a loop in f64) and the L2
// regulariser (Keras's: factor * sum of squares; its gradient 2 * factor * w), with the kernels that
// kernel_variables picks for it.
#include <cmath>

#include "graph/gradients.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Objectives.label_smoothing_matches_the_smoothed_targets") {
  const std::vector<double> logits = {2.0, -1.0, 0.5, 3.0, 0.0, 0.25, -2.0, 1.5, 1.0, 1.0, -0.5, 4.0};
  const std::vector<int64_t> labels = {0, 3, 1};
  const int64_t batch = 3, classes = 4;
  for (const double s : {0.0, 0.1, 0.5, 1.0}) {
    CAPTURE(s);
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    auto z = ops::variable(b, "z", {batch, classes}, ops::Initializer::zeros(), DType::f64);
    const ops::ClassifierObjective objective = ops::classifier_objective(b, z, {.label_smoothing = s});
    auto gradient = graph::gradients(b, objective.loss, std::vector<graph::ValueRef>{z});
    REQUIRE_MESSAGE(gradient.ok(), gradient.status().to_string());
    runtime::Session session(g, ops::kernels(), {.threads = 1});
    session.assign_variable("z", Tensor::from<double>(TensorShape{batch, classes}, std::span<const double>(logits)));
    auto got = session.run({{"labels", Tensor::from<int64_t>(TensorShape{batch}, std::span<const int64_t>(labels))}},
                           {objective.loss, (*gradient)[0]});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    double loss = 0;
    std::vector<double> expected_gradient(logits.size());
    for (int64_t r = 0; r < batch; ++r) {
      const double* row = logits.data() + r * classes;
      double max = row[0], sum = 0;
      for (int64_t k = 1; k < classes; ++k) max = std::max(max, row[k]);
      for (int64_t k = 0; k < classes; ++k) sum += std::exp(row[k] - max);
      for (int64_t k = 0; k < classes; ++k) {
        const double target = (k == labels[static_cast<size_t>(r)] ? 1 - s : 0) + s / classes;
        const double log_softmax = row[k] - max - std::log(sum);
        loss -= target * log_softmax / batch;
        expected_gradient[static_cast<size_t>(r * classes + k)] = (std::exp(log_softmax) - target) / batch;
      }
    }
    CHECK((*got)[0].to_vector<double>()[0] == doctest::Approx(loss).epsilon(1e-14));
    const std::vector<double> d = (*got)[1].to_vector<double>();
    for (size_t i = 0; i < d.size(); ++i) CHECK(d[i] == doctest::Approx(expected_gradient[i]).epsilon(1e-12));
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  (void)ops::classifier_objective(b, ops::placeholder(b, "z", DType::f32, {-1, 4}), {.label_smoothing = 1.5});
  CHECK(b.status().message() == "label smoothing 1.500000 is not in [0, 1]");
  graph::Graph h;
  graph::Builder c(h, ops::registry());
  (void)ops::classifier_objective(c, ops::placeholder(c, "z", DType::f32, {-1, -1}), {.label_smoothing = 0.1});
  CHECK(c.status().message() == "label smoothing needs logits of shape [batch, classes] with the classes known");
}

TEST_CASE("Objectives.l2_regularization_is_kerass") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const std::vector<double> kernel_values = {1.0, -2.0, 0.5, 3.0};
  auto kernel = ops::variable(b, "dense/kernel", {2, 2}, ops::Initializer::zeros(), DType::f64);
  auto bias = ops::variable(b, "dense/bias", {2}, ops::Initializer::constant(5.0), DType::f64);
  auto gamma = ops::variable(b, "bn/gamma", {2}, ops::Initializer::ones(), DType::f64);
  auto conv = ops::variable(b, "conv/filter", {3}, ops::Initializer::constant(-1.0), DType::f64);
  (void)ops::variable(b, "bn/moving_mean", {2}, ops::Initializer::zeros(), DType::f64, /*trainable=*/false);
  (void)bias;
  (void)gamma;
  const std::vector<graph::ValueRef> kernels = ops::kernel_variables(g);
  REQUIRE(kernels.size() == 2u);
  CHECK(kernels[0] == kernel);
  CHECK(kernels[1] == conv);
  auto penalty = ops::l2_regularization(b, kernels, 1e-2);
  auto gradients = graph::gradients(b, penalty, kernels);
  REQUIRE(gradients.ok());
  runtime::Session session(g, ops::kernels(), {.threads = 1});
  session.assign_variable("dense/kernel", Tensor::from<double>(TensorShape{2, 2}, std::span<const double>(kernel_values)));
  auto got = session.run({}, {penalty, (*gradients)[0], (*gradients)[1]});
  REQUIRE(got.ok());
  CHECK((*got)[0].to_vector<double>()[0] == doctest::Approx(1e-2 * (1 + 4 + 0.25 + 9 + 3)).epsilon(1e-14));
  const std::vector<double> d = (*got)[1].to_vector<double>();
  for (size_t i = 0; i < d.size(); ++i) CHECK(d[i] == doctest::Approx(2e-2 * kernel_values[i]).epsilon(1e-14));
  CHECK((*got)[2].to_vector<double>() == std::vector<double>(3, -2e-2));
  (void)ops::l2_regularization(b, {}, 1e-2);
  CHECK(b.status().message() == "l2_regularization: no weights");
}

}  // namespace
}  // namespace mirra::test
