// Dynamic loss scaling: AllFinite and UpdateLossScale against their definitions; minimize with loss
// scaling skips a step whose gradients overflow (nothing changes but the scale, which halves) and
// then trains exactly as a run that started at the scale it came down to; with a power-of-two scale
// and no overflow it trains bitwise as without scaling; gated updates change nothing when told not to.
#include <cmath>
#include <limits>
#include <map>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Kernels.AllFinite.is_false_for_any_nan_or_infinity") {
  runtime::Random rng(5);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor big = random_tensor<float>(rng, {100000});  // a parallel scan
  Tensor big_with_nan = random_tensor<float>(rng, {100000});
  big_with_nan.mutable_data<float>()[77777] = nan;
  const Tensor wide = random_tensor<double>(rng, {7});
  const auto check = [](const std::vector<Tensor>& inputs, bool finite) {
    check_op("AllFinite", inputs, {}, {Tensor::scalar<bool>(finite)});
  };
  check({big}, true);
  check({big, wide}, true);
  check({big_with_nan}, false);
  check({wide, Tensor::from<float>({3}, {1, -inf, 2})}, false);
  check({Tensor::from<float>({2}, {inf, 0})}, false);
  check({Tensor::from<float>({0}, {})}, true);
  for (const bool with_infinity : {false, true}) {
    check_op_at_every_dtype("AllFinite", [&](DType dtype) {
      const Tensor whole = random_of(rng, dtype, {7}, -4, 4);
      Tensor big = random_of(rng, dtype, {100000}, -4, 4);
      if (with_infinity) big = make_tensor(dtype, big.shape(), [&](int64_t i) { return i == 77777 ? inf : element(big, i); });
      return OpCase{{whole, big}, {}, {Tensor::scalar<bool>(!(with_infinity && graph::is_floating(dtype)))}};
    });
  }
}

// Runs UpdateLossScale once per entry of `finite` from (scale, 0) and returns (scale, good steps).
std::pair<float, int64_t> rescale(float scale, const std::vector<bool>& finite, int64_t growth_steps,
                                  graph::DeviceKind kind = graph::DeviceKind::cpu) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto s = ops::variable(b, "scale", {}, ops::Initializer::constant(scale), DType::f32, false);
  auto good = ops::variable(b, "good", {}, ops::Initializer::zeros(), DType::i64, false);
  auto flag = ops::placeholder(b, "finite", DType::boolean, {});
  const graph::NodeId update = ops::update_loss_scale(b, s, good, flag, growth_steps);
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels(), {.default_device = {kind, 0}});
  for (bool f : finite) {
    REQUIRE(session.run({{"finite", Tensor::scalar<bool>(f)}}, std::span<const graph::ValueRef>(),
                        std::vector<graph::NodeId>{update}).ok());
  }
  return {session.read_variable("scale")->to_vector<float>()[0], session.read_variable("good")->to_vector<int64_t>()[0]};
}

TEST_CASE("Kernels.UpdateLossScale.grows_after_good_steps_and_halves_on_overflow") {
  std::vector<graph::DeviceKind> kinds = {graph::DeviceKind::cpu};
  kinds.insert(kinds.end(), backends_under_test().begin(), backends_under_test().end());
  for (graph::DeviceKind kind : kinds) {
    CAPTURE(graph::device_kind_name(kind));
    CHECK(rescale(1024, {true, true}, 3, kind) == std::pair{1024.0f, int64_t{2}});
    CHECK(rescale(1024, {true, true, true}, 3, kind) == std::pair{2048.0f, int64_t{0}});
    CHECK(rescale(1024, {true, true, false}, 3, kind) == std::pair{512.0f, int64_t{0}});
    CHECK(rescale(1024, {true, true, false, true, true, true}, 3, kind) == std::pair{1024.0f, int64_t{0}});
    CHECK(rescale(2, {false, false, false}, 3, kind) == std::pair{1.0f, int64_t{0}});  // not below 1
    const float largest = std::ldexp(1.0f, 127);
    CHECK(rescale(largest, {true}, 1, kind) == std::pair{largest, int64_t{0}});  // doubling would overflow
    (kind == graph::DeviceKind::cpu ? checked_ops() : conformance_checked(kind)).insert("UpdateLossScale");
  }
  // Alone, at every dtype of the scale its schema accepts: a good step that completes the growth
  // steps doubles the scale and restarts the count; an overflow halves it.
  for (const bool finite : {true, false}) {
    check_op_at_every_dtype("UpdateLossScale", [&](DType dtype) {
      return OpCase{.inputs = {make_tensor(dtype, {}, [](int64_t) { return 1024.0; }), Tensor::scalar<int64_t>(2),
                               Tensor::scalar<bool>(finite)},
                    .attrs = {{"growth_steps", int64_t{3}}},
                    .expected = {make_tensor(dtype, {}, [&](int64_t) { return finite ? 2048.0 : 512.0; }), Tensor::scalar<int64_t>(0)},
                    .variables = 2};
    });
  }
}

// A two-layer classifier in f32 on fixed data; with `scaling`, minimize scales its loss.
struct Net {
  graph::Graph graph;
  graph::NodeId train = graph::kInvalidNode;
};

Net net(const ops::Optimizer& optimizer, std::optional<ops::LossScaling> scaling) {
  Net n;
  graph::Builder b(n.graph, ops::registry(), 11);
  auto x = ops::placeholder(b, "images", DType::f32, {-1, 6});
  auto w1 = ops::variable(b, "w1", {6, 5}, ops::Initializer::glorot_uniform());
  auto w2 = ops::variable(b, "w2", {5, 3}, ops::Initializer::glorot_uniform());
  auto logits = ops::matmul(b, ops::relu(b, ops::matmul(b, x, w1)), w2);
  auto objective = ops::classifier_objective(b, logits);
  auto train = ops::minimize(b, objective.loss, optimizer, {.loss_scaling = scaling});
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  n.train = train->train;
  return n;
}

struct Batch {
  Tensor images, labels;
};

std::vector<Batch> batches(int count) {
  runtime::Random rng(21);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int64_t> labels(8);
    for (size_t j = 0; j < labels.size(); ++j) labels[j] = static_cast<int64_t>(rng.uniform() * 3);
    // Inputs up to 20 make weight gradients above 2, which overflow f32 when scaled by 2^127.
    out.push_back({random_tensor<float>(rng, {8, 6}, -20, 20), Tensor::from<int64_t>({8}, std::span<const int64_t>(labels))});
  }
  return out;
}

// Every variable after training on `data` from step `first` on.
std::map<std::string, std::vector<float>> train(Net& n, const std::vector<Batch>& data, size_t first,
                                                std::vector<float>* scales = nullptr) {
  runtime::Session session(n.graph, ops::kernels());
  for (size_t i = first; i < data.size(); ++i) {
    REQUIRE(session.run({{"images", data[i].images}, {"labels", data[i].labels}}, std::span<const graph::ValueRef>(),
                        std::vector<graph::NodeId>{n.train}).ok());
    if (scales != nullptr) scales->push_back(session.read_variable(std::string(ops::kLossScaleVariable))->to_vector<float>()[0]);
  }
  std::map<std::string, std::vector<float>> values;
  for (const std::string& name : session.variables().names()) {
    const auto value = session.variables().find(name);
    if (value->dtype() == DType::f32) {
      values[name] = value->to_vector<float>();
    } else if (value->dtype() == DType::i64) {
      for (int64_t v : value->to_vector<int64_t>()) values[name].push_back(static_cast<float>(v));
    }
  }
  return values;
}

TEST_CASE("LossScaling.an_overflowing_step_is_skipped_and_the_run_goes_on_as_from_the_lower_scale") {
  const std::vector<Batch> data = batches(12);
  for (const ops::Optimizer& optimizer : {ops::Optimizer::momentum_sgd(0.1, 0.9), ops::Optimizer::adam(0.01)}) {
    CAPTURE(optimizer.kind);
    // 2^127 times a gradient of 2 or more is beyond f32's largest value (just under 2^128).
    Net forced = net(optimizer, ops::LossScaling{.initial_scale = std::ldexp(1.0, 127), .growth_steps = 1000});
    std::vector<float> scales;
    const auto after_overflow = train(forced, data, 0, &scales);
    size_t skipped = 0;  // the leading steps that overflowed, each halving the scale
    while (skipped < scales.size() && scales[skipped] == std::ldexp(1.0f, 126 - static_cast<int>(skipped))) ++skipped;
    REQUIRE(skipped >= 1);
    CHECK(skipped < 12);
    size_t halvings = skipped;  // later steps may overflow too (the gradients grow as training goes)
    for (size_t i = skipped; i < scales.size(); ++i) halvings += scales[i] < scales[i - 1] ? 1 : 0;
    // A run that starts at the scale the forced one came down to, on the batches after the skipped
    // ones, ends with the same state: the skipped steps changed nothing but the scale.
    Net clean = net(optimizer, ops::LossScaling{.initial_scale = std::ldexp(1.0, 127 - static_cast<int>(skipped)),
                                                .growth_steps = 1000});
    const auto reference = train(clean, data, skipped);
    CHECK(after_overflow == reference);
    CHECK(after_overflow.at(std::string(ops::kIterationsVariable)) ==
          std::vector<float>{static_cast<float>(data.size() - halvings)});
  }
}

TEST_CASE("LossScaling.a_power_of_two_scale_without_overflow_changes_nothing") {
  const std::vector<Batch> data = batches(10);
  for (const ops::Optimizer& optimizer : {ops::Optimizer::sgd(0.2), ops::Optimizer::adam(0.01)}) {
    CAPTURE(optimizer.kind);
    Net plain = net(optimizer, std::nullopt);
    Net scaled = net(optimizer, ops::LossScaling{.initial_scale = 1024, .growth_steps = 4});
    auto unscaled_values = train(plain, data, 0), scaled_values = train(scaled, data, 0);
    CHECK(scaled_values.at(std::string(ops::kLossScaleVariable)) == std::vector<float>{1024.0f * 4});  // grew twice
    CHECK(scaled_values.at(std::string(ops::kLossScaleGoodStepsVariable)) == std::vector<float>{2});
    for (const char* name : {"w1", "w2"}) CHECK(scaled_values.at(name) == unscaled_values.at(name));
  }
}

TEST_CASE("LossScaling.bad_options_are_errors") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto w = ops::variable(b, "w", {2});
  auto loss = ops::reduce_sum(b, ops::square(b, w));
  auto both = ops::minimize(b, loss, ops::Optimizer::sgd(0.1), {.check_numerics = true, .loss_scaling = ops::LossScaling{}});
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message().find("exclude each other") != std::string::npos);
  auto small = ops::minimize(b, loss, ops::Optimizer::sgd(0.1), {.loss_scaling = ops::LossScaling{.initial_scale = 0.5}});
  REQUIRE_FALSE(small.ok());
  CHECK(small.status().message() == "the initial loss scale must be in [1, 3.4e38]");
  checked_ops().insert("AllFinite");
}

}  // namespace
}  // namespace mirra::test
