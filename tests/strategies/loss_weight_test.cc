// A loss averaged over a declared weight (TrainingGraph::loss_weight; Note [Loss weights] in
// strategies/gradient_seeds.cc): a masked per-token cross-entropy, the masked losses' sum divided by
// the tokens the mask keeps, plus an L2 weight decay, reports and trains as on one device, and so do
// the signature's metrics (a token accuracy averaged over the kept tokens, a mean squared error of
// the probabilities over every element, the kept tokens summed, a weight norm that does not depend on
// the batch), under
// Mirrored and CentralStorage over 1 to 3 replicas, on batches that split unevenly, leave a replica no
// example, and leave a replica examples whose every token is masked (0/0 if a replica divided by its
// own count); and accumulated over micro-batches as one step on them joined. The same loss without
// the declared weight is refused, naming its Div and the remedy; a weight that is no count of the
// batch is refused too.
#include <doctest/doctest.h>

#include "tests/strategies/strategy_test_util.h"

namespace mirra::strategies::test {
namespace {

using graph::DType;
using graph::ValueRef;

constexpr int64_t kTokens = 3, kFeatures = 4, kClasses = 5;

struct MaskedBatch {
  runtime::Tensor images, labels, mask;
};

struct Built {
  TrainingProgram program;
  ValueRef kept;  // the count of tokens the mask keeps
};

// With `declare`, the signature names the count as its loss weight.
Built build(bool declare) {
  Built out;
  TrainingProgram& program = out.program;
  graph::Builder b(program.graph, ops::registry(), /*seed=*/5);
  const ValueRef x = ops::placeholder(b, "images", DType::f64, {-1, kTokens, kFeatures});
  const ValueRef labels = ops::placeholder(b, "labels", DType::i64, {-1, kTokens});
  const ValueRef mask = ops::placeholder(b, "mask", DType::f64, {-1, kTokens});
  const ValueRef w = ops::variable(b, "w", {kFeatures, kClasses}, ops::Initializer::glorot_uniform(), DType::f64);
  const ValueRef logits = ops::matmul(b, ops::reshape(b, x, {-1, kFeatures}), w);
  const ValueRef flat_labels = ops::reshape(b, labels, {-1});
  const ValueRef losses = ops::sparse_softmax_cross_entropy_with_logits(b, logits, flat_labels).loss;
  const ValueRef masked = ops::mul(b, ops::reshape(b, losses, {-1, kTokens}), mask);
  out.kept = ops::reduce_sum(b, mask);
  const ValueRef decay = ops::mul(b, ops::scalar_of(b, 0.01, w), ops::reduce_sum(b, ops::square(b, w)));
  const ValueRef loss = ops::add(b, ops::div(b, ops::reduce_sum(b, masked), out.kept), decay);
  const ValueRef hits = ops::cast(b, ops::equal(b, ops::argmax(b, logits, 1), flat_labels), DType::f64);
  const ValueRef correct = ops::cast(b, ops::reduce_sum(b, hits), DType::f32);
  const ValueRef token_accuracy = ops::div(b, ops::reduce_sum(b, ops::mul(b, ops::reshape(b, hits, {-1, kTokens}), mask)), out.kept);
  const ValueRef error = ops::sub(b, ops::softmax(b, logits), ops::cast(b, ops::one_hot(b, flat_labels, kClasses), DType::f64));
  using runtime::training::MetricReduction;
  const std::vector<runtime::training::TrainingMetric> metrics = {
      {"token_accuracy", token_accuracy, MetricReduction::mean, out.kept},
      {"brier", ops::reduce_mean(b, ops::square(b, error)), MetricReduction::mean, {}},
      {"kept_tokens", out.kept, MetricReduction::sum, {}},
      {"weight_norm", ops::reduce_sum(b, ops::square(b, w)), MetricReduction::mean, {}},
  };
  auto train = ops::minimize(b, loss, ops::Optimizer::momentum_sgd(0.1, 0.9));
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  program.signature = {.loss = loss, .loss_weight = declare ? out.kept : ValueRef{}, .correct = correct,
                       .metrics = metrics, .train = train->train, .learning_rate = train->learning_rate};
  program.variables_and_gradients = train->variables_and_gradients;
  program.loss_gradient = train->loss_gradient;
  program.step_state = train->step_state;
  return out;
}

// `size` examples; the rows in `masked_rows` keep no token, every other row keeps a random subset
// (at least its first token).
MaskedBatch batch_of(int64_t size, std::vector<int64_t> masked_rows, runtime::Random& rng) {
  std::vector<double> x(static_cast<size_t>(size * kTokens * kFeatures)), mask(static_cast<size_t>(size * kTokens));
  std::vector<int64_t> labels(static_cast<size_t>(size * kTokens));
  for (double& v : x) v = 2 * rng.uniform() - 1;
  for (int64_t& v : labels) v = static_cast<int64_t>(rng.below(kClasses));
  for (int64_t row = 0; row < size; ++row) {
    const bool none = std::find(masked_rows.begin(), masked_rows.end(), row) != masked_rows.end();
    for (int64_t t = 0; t < kTokens; ++t) {
      mask[static_cast<size_t>(row * kTokens + t)] = !none && (t == 0 || rng.below(2) == 1) ? 1.0 : 0.0;
    }
  }
  return {runtime::Tensor::from<double>(runtime::TensorShape({size, kTokens, kFeatures}), std::span<const double>(x)),
          runtime::Tensor::from<int64_t>(runtime::TensorShape({size, kTokens}), std::span<const int64_t>(labels)),
          runtime::Tensor::from<double>(runtime::TensorShape({size, kTokens}), std::span<const double>(mask))};
}

runtime::Feeds feeds_of(const MaskedBatch& batch) {
  return {{"images", batch.images}, {"labels", batch.labels}, {"mask", batch.mask}};
}

struct Trained {
  std::vector<double> losses, weights;
  std::vector<std::vector<double>> metrics;  // per step, in the signature's order
  std::map<std::string, std::vector<double>> variables;  // replica 0's, by replica-free name
};

graph::Expected<std::unique_ptr<Strategy>> strategy_over(const std::string& strategy, int replicas) {
  return make_strategy({.strategy = strategy, .devices = devices_of(graph::DeviceKind::cpu, replicas)});
}

Trained variables_of(runtime::Session& session, Trained out) {
  for (const auto& [name, value] : float_variables(session)) {
    int replica = -1;
    const std::string plain(replica_free_name(name, &replica));
    if (replica <= 0 && !plain.starts_with("accumulate/")) out.variables[plain] = value;
  }
  return out;
}

Trained train(const TrainingProgram& program, const std::string& strategy, int replicas,
              const std::vector<MaskedBatch>& batches) {
  auto made = strategy_over(strategy, replicas);
  REQUIRE(made.ok());
  auto distributed = (*made)->distribute(program);
  REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
  REQUIRE(distributed->signature.loss_weight.valid());
  runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
  Trained out;
  std::vector<ValueRef> fetches = {distributed->signature.loss, distributed->signature.loss_weight};
  for (const auto& metric : distributed->signature.metrics) fetches.push_back(metric.value);
  REQUIRE(distributed->signature.metrics[0].weight.valid());  // the whole batch's kept tokens
  for (const MaskedBatch& batch : batches) {
    const graph::NodeId targets[] = {distributed->signature.train};
    auto step = session.run(feeds_of(batch), fetches, targets);
    REQUIRE_MESSAGE(step.ok(), step.status().to_string());
    out.losses.push_back((*step)[0].values<double>()[0]);
    out.weights.push_back((*step)[1].values<double>()[0]);
    out.metrics.emplace_back();
    for (size_t i = 2; i < step->size(); ++i) out.metrics.back().push_back((*step)[i].values<double>()[0]);
  }
  return variables_of(session, std::move(out));
}

// The parts' rows of one member, in order.
template <class T>
runtime::Tensor rows_of(const std::vector<MaskedBatch>& parts, runtime::Tensor MaskedBatch::*member) {
  std::vector<T> values;
  std::vector<int64_t> dims;
  for (const MaskedBatch& part : parts) {
    const runtime::Tensor& t = part.*member;
    const auto v = t.values<T>();
    values.insert(values.end(), v.begin(), v.end());
    const int64_t rows = dims.empty() ? 0 : dims[0];
    dims.assign(t.shape().dims().begin(), t.shape().dims().end());
    dims[0] += rows;
  }
  return runtime::Tensor::from<T>(runtime::TensorShape(dims), std::span<const T>(values));
}

MaskedBatch join(const std::vector<MaskedBatch>& parts) {
  return {rows_of<double>(parts, &MaskedBatch::images), rows_of<int64_t>(parts, &MaskedBatch::labels),
          rows_of<double>(parts, &MaskedBatch::mask)};
}

TEST_CASE("Strategies.a_loss_over_a_declared_weight_trains_as_one_device") {
  const Built built = build(/*declare=*/true);
  runtime::Random rng(23);
  // 6 over 3: replica 0's rows 0 and 1 keep no token; 2 over 3: replica 2 has no example.
  const std::vector<MaskedBatch> batches = {batch_of(8, {}, rng), batch_of(6, {0, 1}, rng), batch_of(5, {4}, rng),
                                            batch_of(2, {}, rng), batch_of(7, {2, 3}, rng)};
  const Trained reference = train(built.program, "one_device", 1, batches);
  for (const char* strategy : {"mirrored", "central_storage"}) {
    for (int replicas = 1; replicas <= 3; ++replicas) {
      const std::string strategy_name = strategy;
      CAPTURE(strategy_name);
      CAPTURE(replicas);
      const Trained got = train(built.program, strategy, replicas, batches);
      for (size_t step = 0; step < batches.size(); ++step) {
        CAPTURE(step);
        CHECK(got.losses[step] == doctest::Approx(reference.losses[step]).epsilon(1e-12));
        CHECK(got.weights[step] == reference.weights[step]);
        for (size_t m = 0; m < got.metrics[step].size(); ++m) {
          CAPTURE(m);
          CHECK(got.metrics[step][m] == doctest::Approx(reference.metrics[step][m]).epsilon(1e-12));
        }
      }
      for (const auto& [name, value] : reference.variables) check_within(name, got.variables.at(name), value, 1e-12);
    }
  }
}

TEST_CASE("Strategies.a_loss_over_a_declared_weight_accumulates_as_one_step_on_the_batches_joined") {
  Built built = build(/*declare=*/true);
  runtime::Random rng(29);
  const std::vector<std::vector<MaskedBatch>> updates = {{batch_of(6, {0, 1}, rng), batch_of(3, {}, rng)},
                                                         {batch_of(4, {3}, rng), batch_of(5, {0, 1, 2}, rng)}};
  Trained want;
  {
    runtime::Session reference(built.program.graph, ops::kernels(), {.threads = 2});
    for (const auto& micro : updates) REQUIRE(reference.run(feeds_of(join(micro)), {}, {built.program.signature.train}).ok());
    want = variables_of(reference, {});
  }
  built.program.accumulate_gradients = true;
  for (const auto& [strategy, replicas] : {std::pair{"mirrored", 2}, std::pair{"mirrored", 3}, std::pair{"central_storage", 2}}) {
    const std::string strategy_name = strategy;
    const int replica_count = replicas;  // a structured binding cannot be captured (C++20)
    CAPTURE(replica_count);
    auto made = strategy_over(strategy, replicas);
    REQUIRE(made.ok());
    auto distributed = (*made)->distribute(built.program);
    REQUIRE_MESSAGE(distributed.ok(), distributed.status().to_string());
    runtime::Session session(distributed->graph, ops::kernels(), {.threads = 2});
    for (const auto& micro : updates) {
      REQUIRE(session.run(feeds_of(micro[0]), {}, {distributed->signature.accumulate}).ok());
      REQUIRE(session.run(feeds_of(micro[1]), {}, {distributed->signature.train}).ok());
    }
    const Trained got = variables_of(session, {});
    for (const auto& [name, value] : want.variables) check_within(name, got.variables.at(name), value, 1e-12);
  }
}

TEST_CASE("Strategies.refuse_a_loss_over_an_undeclared_or_unfit_weight") {
  Built built = build(/*declare=*/false);
  auto made = strategy_over("mirrored", 2);
  REQUIRE(made.ok());
  auto refused = (*made)->distribute(built.program);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("the loss's node 'Div' (Div) divides by a value that depends on the batch") !=
        std::string::npos);
  CHECK(refused.status().message().find("when the signature declares that count as its loss_weight") != std::string::npos);

  const ValueRef w = {*built.program.graph.find("w"), 0};
  graph::Builder b(built.program.graph, ops::registry());
  built.program.signature.loss_weight = ops::reduce_sum(b, w);
  refused = (*made)->distribute(built.program);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("' does not depend on the batch") != std::string::npos);

  built.program.signature.loss_weight = ops::reduce_sum(b, ops::mul(b, ops::reduce_sum(b, w), built.kept));
  refused = (*made)->distribute(built.program);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("depends on a variable; it must count what the batch holds") != std::string::npos);
}

}  // namespace
}  // namespace mirra::strategies::test
