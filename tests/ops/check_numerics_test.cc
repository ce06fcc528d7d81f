// CheckNumerics: finite inputs pass through unchanged; a NaN or an infinity is an error naming the
// message and counting each kind; and minimize(check_numerics) stops a step before a bad update.
#include <cmath>
#include <limits>

#include "runtime/random.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Kernels.CheckNumerics.passes_finite_values_and_names_bad_ones") {
  const graph::AttrMap attrs = {{"message", std::string("the gradient of 'w'")}};
  check_op("CheckNumerics", {Tensor::from<float>({2, 2}, {1, -2, 3e38f, 0})}, attrs,
           {Tensor::from<float>({2, 2}, {1, -2, 3e38f, 0})});
  check_op("CheckNumerics", {Tensor::from<double>({0, 3}, std::span<const double>())}, attrs,
           {Tensor::from<double>({0, 3}, std::span<const double>())});

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto bad = run_op("CheckNumerics", {Tensor::from<float>({5}, {nan, 1, -inf, inf, nan})}, attrs);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == graph::StatusCode::invalid_argument);
  CHECK(bad.status().message().find("the gradient of 'w': f32[5] holds 2 NaN and 2 infinite values") != std::string::npos);
  CHECK_FALSE(run_op("CheckNumerics", {Tensor::from<int32_t>({1}, {1})}, attrs).ok());  // floating only

  runtime::Random rng(3);
  check_op_at_every_dtype("CheckNumerics", [&](DType dtype) {
    const Tensor finite = random_of(rng, dtype, {40000}, -100, 100);
    return OpCase{{finite}, attrs, {finite}};
  });
}

TEST_CASE("Optimizers.minimize.check_numerics_stops_a_step_before_its_update") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto x = ops::placeholder(b, "x", DType::f32, {-1});
  const auto w = ops::variable(b, "w", {1}, ops::Initializer::constant(2.0));
  const auto loss = ops::reduce_sum(b, ops::sqrt(b, ops::mul(b, x, w)));  // its gradient is NaN for a negative x
  auto train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1), {.check_numerics = true});
  REQUIRE(train.ok());
  runtime::Session session(g, ops::kernels());
  REQUIRE(session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {}, {train->train}).ok());
  const float after_good_step = session.run({}, {w}).value()[0].data<float>()[0];
  const auto failed = session.run({{"x", Tensor::from<float>({2}, {-1, 2})}}, {}, {train->train});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("the gradient of 'w'") != std::string::npos);
  CHECK(session.run({}, {w}).value()[0].data<float>()[0] == after_good_step);  // the bad update never ran
}

}  // namespace
}  // namespace mirra::test
