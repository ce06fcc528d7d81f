// gpt-tiny (examples/gpt_model.cc) against PyTorch in float64: the loss and the gradient of every
// trained variable for one batch (tests/strategies/reference/gpt_torch.json, written once by the
// script beside it, which states the network, the weights' and tokens' formulas, and how each
// gradient is summarised: its sum of squares, four projections and sixteen elements), within 1e-6.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "examples/models.h"
#include "graph/gradients.h"
#include "ops/model_cost.h"
#include "tests/golden_file.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int64_t kBatch = 2;

// Within `relative` of want, on the scale of `scale` (a gradient's size) or want's own.
void check_number(const std::string& what, double got, double want, double relative, double scale) {
  CAPTURE(what);
  CHECK_MESSAGE(std::abs(got - want) <= relative * std::max(std::abs(want), scale), got << " vs PyTorch's " << want);
}

// gpt-tiny's shape in f64, with the fused attention op or the composite, against the reference.
void check_against_reference(const nlohmann::json& reference, bool fused) {
  CAPTURE(fused);
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 1);
  const examples::GptOptions options{.fused_attention = fused, .dtype = graph::DType::f64};
  const examples::LanguageModel model = examples::build_gpt(b, options);
  const auto targets = ops::placeholder(b, "targets", graph::DType::i64, {-1, options.context});
  const auto loss =
      ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, model.logits, ops::reshape(b, targets, {-1})).loss);
  std::map<std::string, graph::ValueRef> trained;  // sorted by name, as the script numbers them
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Variable") trained[node.name] = {node.id, 0};
  }
  std::vector<graph::ValueRef> variables;
  for (const auto& [name, value] : trained) variables.push_back(value);
  auto gradients = graph::gradients(b, loss, variables);
  REQUIRE_MESSAGE(gradients.ok(), gradients.status().to_string());
  REQUIRE(trained.size() == reference["gradients"].size());

  runtime::Session session(g, ops::kernels(), {.threads = 2});
  assign_reference_weights(session, g, trained);
  std::vector<int64_t> tokens, next;
  for (int64_t e = 0; e < kBatch; ++e) {
    for (int64_t t = 0; t < options.context; ++t) {
      tokens.push_back((3 * e + 7 * t + t * t) % options.vocab);
      next.push_back((5 * e + 11 * t + 1) % options.vocab);
    }
  }
  std::vector<graph::ValueRef> fetches = {loss};
  fetches.insert(fetches.end(), gradients->begin(), gradients->end());
  auto out = session.run({{"inputs", runtime::Tensor::from<int64_t>({kBatch, options.context}, std::span<const int64_t>(tokens))},
                          {"targets", runtime::Tensor::from<int64_t>({kBatch, options.context}, std::span<const int64_t>(next))}},
                         fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  check_number("loss", (*out)[0].values<double>()[0], reference["loss"].get<double>(), 1e-9, 0);
  size_t i = 1;
  for (const auto& [name, value] : trained) {
    const std::span<const double> grad = (*out)[i++].values<double>();
    const nlohmann::json& want = reference["gradients"][name];
    const double n = static_cast<double>(grad.size());
    double squares = 0;
    for (const double v : grad) squares += v * v;
    check_number(name + " sum of squares", squares, want["sum_of_squares"].get<double>(), 1e-6, 0);
    // A projection is at most sqrt(squares * n) (Cauchy-Schwarz); an element, the gradient's rms.
    const double norm = std::sqrt(want["sum_of_squares"].get<double>());
    for (int m = 0; m < 4; ++m) {
      double projection = 0;
      for (size_t j = 0; j < grad.size(); ++j) projection += grad[j] * std::sin(0.1 * (m + 1) * static_cast<double>(j) + m);
      check_number(name + " projection " + std::to_string(m), projection, want["projections"][m].get<double>(), 1e-6,
                   norm * std::sqrt(n) * 1e-3);
    }
    for (int s = 0; s < 16; ++s) {
      const size_t j = static_cast<size_t>(grad.size() * s / 16);
      check_number(name + " element " + std::to_string(j), grad[j], want["samples"][s].get<double>(), 1e-6, norm / std::sqrt(n));
    }
  }
}

TEST_CASE("GPT.loss_and_every_gradient_match_pytorch_in_float64") {
  std::ifstream file(mirra::test::source_file("tests/strategies/reference/gpt_torch.json"));
  REQUIRE(file.good());
  const nlohmann::json reference = nlohmann::json::parse(file);
  for (const bool fused : {true, false}) check_against_reference(reference, fused);
}

// GPT-2 small's 124,439,808 parameters (tied embeddings, 1,024 positions), and the forward pass's
// products: each weight of the blocks and the output projection once per token, and the attention's
// 2 x layers x context x width per token (q k^T and P v over every key).
TEST_CASE("GPT.gpt2_small_has_gpt2s_parameters_and_products") {
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 1);
  const examples::GptOptions o{.layers = 12, .heads = 12, .embedding = 768, .context = 1024, .vocab = 50257};
  const examples::LanguageModel model = examples::build_gpt(b, o);
  REQUIRE(b.status().ok());
  int64_t parameters = 0;
  for (const graph::Node& node : g.nodes()) {
    if (node.op == "Variable") parameters += *node.outputs[0].shape.num_elements();
  }
  CHECK(parameters == 124'439'808);
  const auto cost = ops::forward_cost(g, std::span(&model.logits.node, 1), ops::registry());
  REQUIRE(cost.ok());
  CHECK(cost->attentions == 12);
  CHECK(cost->attention_multiply_adds == 2 * o.layers * o.context * o.context * o.embedding);
  const int64_t block_weights = 12 * o.embedding * o.embedding;  // qkv 3E^2, projection E^2, MLP 8E^2
  CHECK(cost->multiply_adds - cost->attention_multiply_adds == o.context * (o.layers * block_weights + o.vocab * o.embedding));
}

}  // namespace
}  // namespace mirra::strategies::test
