// Dropout keyed by example (ops/dropout_ops.h) keeps N replicas computing what one device computes: a
// small GPT with dropout in float64, trained 20 steps of AdamW on batches of 7 (uneven over 2, 3 and 4
// replicas), gives one device's losses and weights under Mirrored over 1 to 4 replicas.
#include <doctest/doctest.h>

#include "examples/models.h"
#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

constexpr int64_t kBatch = 7, kContext = 6, kVocab = 13;

TrainingProgram gpt_program(double dropout) {
  TrainingProgram program;
  graph::Builder b(program.graph, ops::registry(), 5);
  const examples::LanguageModel model = examples::build_gpt(
      b, {.layers = 2, .heads = 2, .embedding = 8, .context = kContext, .vocab = kVocab, .dropout = dropout, .dtype = graph::DType::f64});
  const auto targets = ops::placeholder(b, "targets", graph::DType::i64, {-1, kContext});
  const auto loss =
      ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, model.logits, ops::reshape(b, targets, {-1})).loss);
  ops::Optimizer optimizer = ops::Optimizer::adamw(1e-2, 0.1);
  optimizer.clip_global_norm = 1.0;
  auto train = ops::minimize(b, loss, optimizer);
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.features = "inputs", .labels = "targets", .loss = loss, .train = train->train,
                       .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return program;
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> variables;  // replica 0's
};

// 20 steps; example i of step s has key s * kBatch + i, as the input pipeline numbers an epoch's
// examples, unless `other_keys`.
Run train_gpt(const TrainingProgram& program, const std::string& strategy, int replicas, bool other_keys = false) {
  auto made = make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  runtime::Random rng(3);
  Run run;
  const bool keyed = distributed->graph.find(std::string(ops::kExampleKeysPlaceholder)).has_value();
  for (int64_t step = 0; step < 20; ++step) {
    std::vector<int64_t> tokens(kBatch * kContext), targets(tokens.size()), keys(kBatch);
    for (int64_t& t : tokens) t = static_cast<int64_t>(rng.below(kVocab));
    for (int64_t& t : targets) t = static_cast<int64_t>(rng.below(kVocab));
    for (int64_t i = 0; i < kBatch; ++i) keys[static_cast<size_t>(i)] = step * kBatch + i + (other_keys ? 1000 : 0);
    runtime::Feeds feeds = {{"inputs", runtime::Tensor::from<int64_t>({kBatch, kContext}, std::span<const int64_t>(tokens))},
                            {"targets", runtime::Tensor::from<int64_t>({kBatch, kContext}, std::span<const int64_t>(targets))}};
    if (keyed) feeds[std::string(ops::kExampleKeysPlaceholder)] = runtime::Tensor::from<int64_t>({kBatch}, std::span<const int64_t>(keys));
    auto out = session.run(feeds, {distributed->signature.loss}, {distributed->signature.train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    run.losses.push_back((*out)[0].values<double>()[0]);
  }
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0) run.variables[plain] = value;
  }
  return run;
}

TEST_CASE("Dropout.keyed_by_example_replicas_train_as_one_device") {
  const TrainingProgram program = gpt_program(0.2);
  const Run reference = train_gpt(program, "one_device", 1);
  for (int replicas = 1; replicas <= 4; ++replicas) {
    CAPTURE(replicas);
    const Run run = train_gpt(program, "mirrored", replicas);
    for (size_t step = 0; step < run.losses.size(); ++step) CHECK(run.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-9));
    for (const auto& [name, value] : reference.variables) check_within(name, run.variables.at(name), value, 1e-8);
  }
  // The masks are drawn: other keys, or no dropout, train otherwise.
  CHECK(std::abs(train_gpt(program, "one_device", 1, true).losses.back() - reference.losses.back()) > 1e-6);
  CHECK(std::abs(train_gpt(gpt_program(0.0), "one_device", 1).losses.front() - reference.losses.front()) > 1e-6);
}

}  // namespace
}  // namespace mirra::strategies::test
