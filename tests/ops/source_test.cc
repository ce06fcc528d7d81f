// Placeholder, Const, Variable (every initialiser, seeded and reproducible), Fill and Range.
#include <cmath>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Kernels.Const_and_Fill.produce_their_values") {
  const std::vector<float> values = {1.5f, -2, 3, 0, 5, 6};
  check_op("Const", {}, {{"value", graph::TensorValue::from<float>({2, 3}, std::span<const float>(values))}},
           {Tensor::from<float>({2, 3}, std::span<const float>(values))});
  check_op("Const", {}, {{"value", graph::TensorValue::from<int64_t>({0}, std::span<const int64_t>())}},
           {Tensor::from<int64_t>({0}, std::span<const int64_t>())});
  runtime::Random rng(1);
  check_op_at_every_dtype("Const", [&](DType dtype) {
    const Tensor value = random_of(rng, dtype, {2, 3}, -4, 4);
    return OpCase{{}, {{"value", runtime::to_tensor_value(value)}}, {value}};
  });
  check_op_at_every_dtype("Fill", [&](DType dtype) {
    return OpCase{{}, {{"shape", graph::Shape{3, 2}}, {"value", 3.0}, {"dtype", dtype}}, {make_tensor(dtype, {3, 2}, [](int64_t) { return 3.0; })}};
  });
}

// Range against start + i * delta in the dtype's arithmetic, counted as TensorFlow counts; its errors.
TEST_CASE("Kernels.Range.counts_and_steps_as_tensorflow") {
  struct Case { double start, limit, delta; };
  for (const Case& c : {Case{0, 5, 1}, Case{2, 11, 3}, Case{5, 1, -2}, Case{5, 5, -2}, Case{-3, 4, 7}, Case{1, -9, -1}}) {
    check_op_at_every_dtype("Range", [&](DType dtype) {
      const auto count = static_cast<int64_t>(std::ceil(std::abs((c.limit - c.start) / c.delta)));
      return OpCase{{}, {{"start", c.start}, {"limit", c.limit}, {"delta", c.delta}, {"dtype", dtype}},
                    {make_tensor(dtype, {count}, [&](int64_t i) { return c.start + static_cast<double>(i) * c.delta; })}};
    });
  }
  // Fractions: each element rounded after the product and after the sum, in f32 and in f64.
  std::vector<float> tenths;
  for (int i = 0; i < 10; ++i) tenths.push_back(0.0f + static_cast<float>(i) * 0.1f);
  check_op("Range", {}, {{"start", 0.0}, {"limit", 1.0}, {"delta", 0.1}, {"dtype", DType::f32}},
           {Tensor::from<float>({10}, std::span<const float>(tenths))}, 0);
  std::vector<double> steps;
  for (int i = 0; i < 5; ++i) steps.push_back(-3.5 + i * 1.25);
  check_op("Range", {}, {{"start", -3.5}, {"limit", 2.0}, {"delta", 1.25}, {"dtype", DType::f64}},
           {Tensor::from<double>({5}, std::span<const double>(steps))}, 0);
  // Errors name the bounds: delta 0, delta away from limit, a fraction for an integer range.
  for (const Case& c : {Case{0, 5, 0}, Case{5, 1, 1}, Case{1, 5, -1}, Case{0, 5, 0.5}}) {
    const auto refused = run_op("Range", {}, {{"start", c.start}, {"limit", c.limit}, {"delta", c.delta}, {"dtype", DType::i32}});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("Range") != std::string::npos);
  }
}

TEST_CASE("Kernels.Variable.initialisers") {
  check_op("Variable", {}, {{"shape", graph::Shape{2, 2}}, {"initializer", std::string("constant")}, {"init_value", 0.25}},
           {Tensor::from<float>({2, 2}, {0.25f, 0.25f, 0.25f, 0.25f})});
  check_op("Variable", {}, {{"shape", graph::Shape{3}}, {"initializer", std::string("ones")}, {"dtype", DType::f64}},
           {Tensor::from<double>({3}, {1, 1, 1})});
  check_op("Variable", {}, {{"shape", graph::Shape{0, 3}}}, {Tensor::from<float>({0, 3}, std::span<const float>())});
  check_op("Variable", {}, {{"shape", graph::Shape{}}, {"initializer", std::string("constant")}, {"init_value", 7.0},
                            {"dtype", DType::i64}}, {Tensor::from<int64_t>({}, {7})});
  for (const char* initializer : {"zeros", "ones", "constant"}) {
    CAPTURE(initializer);
    check_op_at_every_dtype("Variable", [&](DType dtype) {
      const double value = std::string_view(initializer) == "zeros" ? 0 : std::string_view(initializer) == "ones" ? 1 : 7;
      return OpCase{{},
                    {{"shape", graph::Shape{2, 3}}, {"initializer", std::string(initializer)}, {"init_value", 7.0}, {"dtype", dtype}},
                    {make_tensor(dtype, {2, 3}, [&](int64_t) { return value; })}};
    });
  }
  CHECK(run_op("Variable", {}, {{"shape", graph::Shape{2}}, {"initializer", std::string("he_normal")}, {"dtype", DType::i32}})
            .status().message() == "node 'Variable' (Variable): initializer 'he_normal' needs a floating variable; inputs ()");

  // Random initialisers: within Keras' bounds, with the expected spread, and reproducible by seed.
  const int64_t fan_in = 300, fan_out = 200;
  for (const char* kind : {"glorot_uniform", "he_uniform", "glorot_normal", "he_normal"}) {
    CAPTURE(kind);
    const graph::AttrMap attrs = {{"shape", graph::Shape{fan_in, fan_out}}, {"initializer", std::string(kind)},
                                  {"seed", int64_t{42}}};
    auto first = run_op("Variable", {}, attrs);
    auto again = run_op("Variable", {}, attrs);
    graph::AttrMap other_seed = attrs;
    other_seed.set("seed", int64_t{43});
    auto other = run_op("Variable", {}, other_seed);
    REQUIRE(first.ok());
    const auto values = (*first)[0].to_vector<float>();
    CHECK(values == (*again)[0].to_vector<float>());
    CHECK(values != (*other)[0].to_vector<float>());
    const bool glorot = std::string_view(kind).starts_with("glorot");
    const double variance = glorot ? 2.0 / (fan_in + fan_out) : 2.0 / fan_in;
    double sum = 0, sum_sq = 0, max_abs = 0;
    for (float v : values) { sum += v; sum_sq += double(v) * v; max_abs = std::max(max_abs, std::abs(double(v))); }
    const double n = static_cast<double>(values.size());
    CHECK(std::abs(sum / n) < 0.01 * std::sqrt(variance) * 10);
    CHECK(sum_sq / n == doctest::Approx(variance).epsilon(0.05));
    const double bound = std::string_view(kind).ends_with("uniform") ? std::sqrt(3 * variance) : 2 * std::sqrt(variance) / 0.87962566103423978;
    CHECK(max_abs <= bound + 1e-6);
  }
  // A plain normal of the given standard deviation (GPT-2's 0.02), not truncated: some draws pass 2 sigma.
  auto normal = run_op("Variable", {}, {{"shape", graph::Shape{fan_in, fan_out}}, {"initializer", std::string("normal")},
                                        {"init_value", 0.02}, {"seed", int64_t{42}}});
  REQUIRE(normal.ok());
  double sum_sq = 0, beyond = 0;
  for (float v : (*normal)[0].to_vector<float>()) {
    sum_sq += double(v) * v;
    beyond += std::abs(v) > 0.04 ? 1 : 0;
  }
  CHECK(std::sqrt(sum_sq / (fan_in * fan_out)) == doctest::Approx(0.02).epsilon(0.02));
  CHECK(beyond / (fan_in * fan_out) == doctest::Approx(0.0455).epsilon(0.1));  // P(|z| > 2)
  checked_ops().insert("Variable");
}

TEST_CASE("Kernels.Placeholder.must_be_fed") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "images", DType::f32, {-1, 4});
  auto y = ops::relu(b, x);
  REQUIRE(b.status().ok());
  std::vector<graph::DeviceKind> kinds = {graph::DeviceKind::cpu};
  kinds.insert(kinds.end(), backends_under_test().begin(), backends_under_test().end());
  for (graph::DeviceKind kind : kinds) {
    const graph::DeviceId device{kind, 0};
    runtime::Session session(g, ops::kernels(), {.default_device = device});
    auto unfed = session.run({}, {y});
    REQUIRE_FALSE(unfed.ok());
    CHECK(unfed.status().message() == "node 'images' (Placeholder) on " + device.to_string() +
                                          ": placeholder 'images' must be fed, and no value was given");
    auto fed = session.run({{"images", Tensor::from<float>({1, 4}, {-1, 2, -3, 4})}}, {y});
    REQUIRE(fed.ok());
    CHECK((*fed)[0].to_vector<float>() == std::vector<float>{0, 2, 0, 4});
    if (kind != graph::DeviceKind::cpu) conformance_checked(kind).insert("Placeholder");
  }
  checked_ops().insert("Placeholder");
  // Fed a value of every dtype it accepts, it gives that value back, on every kind.
  runtime::Random rng(2);
  sweep_dtypes("Placeholder", [](DType dtype) { return std::pair{std::vector<graph::TensorType>{}, AttrMap{{"dtype", dtype}, {"shape", graph::Shape{-1, 3}}}}; },
               [&](DType dtype) {
                 graph::Graph fed_graph;
                 graph::Builder fb(fed_graph, ops::registry());
                 const auto in = ops::placeholder(fb, "in", dtype, {-1, 3});
                 REQUIRE(fb.status().ok());
                 const Tensor value = random_of(rng, dtype, {4, 3}, -4, 4);
                 for (graph::DeviceKind kind : kinds) {
                   runtime::Session session(fed_graph, ops::kernels(), {.default_device = {kind, 0}});
                   auto out = session.run({{"in", value}}, {in});
                   REQUIRE_MESSAGE(out.ok(), out.status().to_string());
                   check_elements((*out)[0], value, 0);
                 }
               });
}

}  // namespace
}  // namespace mirra::test
