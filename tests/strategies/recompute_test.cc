// Recomputation (ops/recomputation.h): a GPT trained with each block's activations computed again in
// the backward pass ends with the very bits of the one that keeps them (deterministic mode), and holds
// less memory at once (the executor's own order).
#include <doctest/doctest.h>

#include "examples/models.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int64_t kBatch = 8, kContext = 64, kVocab = 50;

struct Trained {
  std::map<std::string, std::vector<double>> variables;
  size_t peak_bytes = 0;
  size_t nodes = 0;
};

Trained train_gpt(ops::Recompute mode, bool deterministic) {
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 9);
  const examples::LanguageModel model =
      examples::build_gpt(b, {.layers = 3, .heads = 2, .embedding = 32, .context = kContext, .vocab = kVocab});
  const auto targets = ops::placeholder(b, "targets", graph::DType::i64, {-1, kContext});
  const auto loss =
      ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, model.logits, ops::reshape(b, targets, {-1})).loss);
  auto train = ops::minimize(b, loss, ops::Optimizer::adamw(1e-2, 0.1), {.recompute = ops::recompute_scopes_of(g, mode)});
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  runtime::Session session(g, ops::kernels(), {.deterministic = deterministic});
  runtime::Random rng(4);
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> tokens(kBatch * kContext), next(tokens.size());
    for (int64_t& t : tokens) t = static_cast<int64_t>(rng.below(kVocab));
    for (int64_t& t : next) t = static_cast<int64_t>(rng.below(kVocab));
    auto out = session.run({{"inputs", runtime::Tensor::from<int64_t>({kBatch, kContext}, std::span<const int64_t>(tokens))},
                            {"targets", runtime::Tensor::from<int64_t>({kBatch, kContext}, std::span<const int64_t>(next))}},
                           {loss}, {train->train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  }
  Trained result{.variables = float_variables(session), .nodes = g.size()};
  for (const auto& device : session.devices().devices()) result.peak_bytes += device->allocator()->stats().peak_bytes_in_use;
  return result;
}

TEST_CASE("Recompute.changes_no_number_and_lowers_the_peak_memory") {
  const Trained kept = train_gpt(ops::Recompute::none, true);
  const Trained recomputed = train_gpt(ops::Recompute::blocks, true);
  CHECK(recomputed.nodes > kept.nodes);  // the copies
  CHECK(recomputed.variables == kept.variables);
  const size_t kept_peak = train_gpt(ops::Recompute::none, false).peak_bytes;
  const size_t recomputed_peak = train_gpt(ops::Recompute::blocks, false).peak_bytes;
  CAPTURE(kept_peak);
  CAPTURE(recomputed_peak);
  CHECK(static_cast<double>(recomputed_peak) < 0.8 * static_cast<double>(kept_peak));
}

TEST_CASE("Recompute.blocks_are_the_block_scopes") {
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 9);
  examples::build_gpt(b, {.layers = 2, .heads = 2, .embedding = 8, .context = 4, .vocab = 5});
  CHECK(ops::recompute_scopes_of(g, ops::Recompute::blocks) == std::vector<std::string>{"gpt/block0/", "gpt/block1/"});
  CHECK(ops::recompute_scopes_of(g, ops::Recompute::none).empty());
  CHECK_FALSE(ops::parse_recompute("some").ok());
}

}  // namespace
}  // namespace mirra::strategies::test
