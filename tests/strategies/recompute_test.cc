// Recomputation (ops/recomputation.h): a GPT trained with each block's activations computed again in
// the backward pass ends with the very bits of the one that keeps them (deterministic mode), and holds
// less memory at once (the executor's own order); `all` adds the scopes beside the blocks; a scope the
// model marks (ops::recompute_scope) is recomputed whatever the mode, the same bits again, and its mark
// survives the model file.
#include <doctest/doctest.h>

#include <filesystem>

#include "examples/example_models.h"
#include "examples/models.h"
#include "serialization/model_file.h"
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

TEST_CASE("Recompute.all_adds_the_scopes_beside_the_blocks") {
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 9);
  examples::build_gpt(b, {.layers = 2, .heads = 2, .embedding = 8, .context = 4, .vocab = 5});
  CHECK(ops::recompute_scopes_of(g, ops::Recompute::all) ==
        std::vector<std::string>{"gpt/block0/", "gpt/block1/", "gpt/final_norm/"});
  CHECK(*ops::parse_recompute("all") == ops::Recompute::all);
  const Trained kept = train_gpt(ops::Recompute::none, true);
  const Trained recomputed = train_gpt(ops::Recompute::all, true);
  CHECK(recomputed.nodes > kept.nodes);
  CHECK(recomputed.variables == kept.variables);
}

// y = w2 gelu(x w1), its first layer in a scope of its own, marked for recomputation or not; 3 steps
// of SGD on the squared error, recomputing what recompute_scopes_of finds with nothing added.
Trained train_two_layers(bool marked) {
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 3);
  const auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 16});
  const auto y = ops::placeholder(b, "y", graph::DType::f32, {-1, 1});
  graph::ValueRef hidden;
  {
    auto scope = marked ? ops::recompute_scope(b, "layer1") : b.scope("layer1");
    const auto w1 = ops::variable(b, "w1", {16, 32}, ops::Initializer::glorot_uniform());
    hidden = ops::gelu(b, ops::matmul(b, x, w1));
  }
  const auto w2 = ops::variable(b, "w2", {32, 1}, ops::Initializer::glorot_uniform());
  const auto loss = ops::reduce_mean(b, ops::square(b, ops::sub(b, ops::matmul(b, hidden, w2), y)));
  CHECK(ops::recompute_scopes_of(g, ops::Recompute::none) == (marked ? std::vector<std::string>{"layer1/"} : std::vector<std::string>{}));
  auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1), {.recompute = ops::recompute_scopes_of(g, ops::Recompute::none)});
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  runtime::Session session(g, ops::kernels(), {.deterministic = true});
  runtime::Random rng(8);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> xs(8 * 16), ys(8);
    for (float& v : xs) v = static_cast<float>(rng.uniform() * 2 - 1);
    for (float& v : ys) v = static_cast<float>(rng.uniform());
    auto out = session.run({{"x", runtime::Tensor::from<float>({8, 16}, std::span<const float>(xs))},
                            {"y", runtime::Tensor::from<float>({8, 1}, std::span<const float>(ys))}},
                           {loss}, {train->train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  }
  return {.variables = float_variables(session), .nodes = g.size()};
}

TEST_CASE("Recompute.a_marked_scope_is_recomputed_whatever_the_mode") {
  const Trained plain = train_two_layers(false);
  const Trained marked = train_two_layers(true);
  CHECK(marked.nodes > plain.nodes + 1);  // the marker and the copies
  CHECK(marked.variables == plain.variables);
  // The mark is a node of the graph, so a model file keeps it.
  auto model = examples::build_example_model("mlp", 1);
  REQUIRE(model.ok());
  {
    graph::Builder b(model->graph, ops::registry(), 1);
    auto scope = ops::recompute_scope(b, "dense1");
  }
  const std::string path = (std::filesystem::temp_directory_path() / "mirra_recompute_mark.mirra").string();
  const graph::Status saved = serialization::save_model(*model, path);
  REQUIRE_MESSAGE(saved.ok(), saved.to_string());
  auto loaded = serialization::load_model(path, ops::registry());
  std::filesystem::remove(path);
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  CHECK(ops::recompute_scopes_of(loaded->graph, ops::Recompute::none) == std::vector<std::string>{"dense1/"});
}

}  // namespace
}  // namespace mirra::strategies::test
