// Element-wise kernels against plain loops: every unary op on several shapes (zero batch, size 1, odd
// sizes) at every dtype its schema accepts, Gelu in both forms, LeakyRelu at several slopes,
// LogicalNot; binary ops, Pow, comparisons and the logical ops with NumPy broadcasting in every
// direction, at every dtype; SelectV2 broadcasting its three operands together; integer division by
// zero.
#include <cmath>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

const std::vector<TensorShape> kShapes = {{0, 3}, {1}, {7, 5}, {2, 3, 4}, {}, {40000}};

struct UnaryCase {
  const char* op;
  double (*reference)(double);
  double low, high;  // input range where the function is defined
};

const UnaryCase kUnary[] = {
    {"Neg", [](double x) { return -x; }, -3, 3},
    {"Exp", [](double x) { return std::exp(x); }, -3, 3},
    {"Log", [](double x) { return std::log(x); }, 0.1, 5},
    {"Sqrt", [](double x) { return std::sqrt(x); }, 0, 5},
    {"Rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
    {"Square", [](double x) { return x * x; }, -3, 3},
    {"Relu", [](double x) { return x > 0 ? x : 0; }, -3, 3},
    {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6},
    {"Tanh", [](double x) { return std::tanh(x); }, -3, 3},
    {"Abs", [](double x) { return std::fabs(x); }, -3, 3},
    {"Sign", [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, -3, 3},
    {"Erf", [](double x) { return std::erf(x); }, -3, 3},
    {"Softplus", [](double x) { return std::log(1 + std::exp(x)); }, -20, 20},
};

TEST_CASE("Kernels.unary.match_reference") {
  runtime::Random rng(1);
  for (const UnaryCase& c : kUnary) {
    for (const TensorShape& shape : kShapes) {
      CAPTURE(shape.to_string());
      check_op_at_every_dtype(c.op, [&](DType dtype) {
        Tensor x = random_of(rng, dtype, shape, c.low, c.high);
        return OpCase{{x}, {}, {make_tensor(dtype, shape, [&](int64_t i) { return c.reference(element(x, i)); })}};
      });
    }
  }
}

// Gelu's two forms, by their textbook definitions: x * Phi(x), and Hendrycks and Gimpel's tanh form.
TEST_CASE("Kernels.Gelu.matches_both_definitions") {
  runtime::Random rng(4);
  const double pi = 3.14159265358979323846;
  for (const bool approximate : {false, true}) {
    for (const TensorShape& shape : kShapes) {
      CAPTURE(shape.to_string());
      check_op_at_every_dtype("Gelu", [&](DType dtype) {
        Tensor x = random_of(rng, dtype, shape, -5, 5);
        const auto gelu = [&](double v) {
          return approximate ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)))
                             : v * 0.5 * std::erfc(-v / std::sqrt(2.0));
        };
        return OpCase{{x}, {{"approximate", approximate}}, {make_tensor(dtype, shape, [&](int64_t i) { return gelu(element(x, i)); })}};
      });
    }
  }
}

// GeluGrad, dy times the derivative of each form, by the textbook formulas.
TEST_CASE("Kernels.GeluGrad.matches_the_derivatives") {
  runtime::Random rng(9);
  const double pi = 3.14159265358979323846;
  for (const bool approximate : {false, true}) {
    for (const TensorShape& shape : kShapes) {
      CAPTURE(shape.to_string());
      check_op_at_every_dtype("GeluGrad", [&](DType dtype) {
        Tensor dy = random_of(rng, dtype, shape, -2, 2);
        Tensor x = random_of(rng, dtype, shape, -6, 6);
        const auto slope = [&](double v) {
          if (!approximate) return 0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * pi);
          const double k = std::sqrt(2 / pi), t = std::tanh(k * (v + 0.044715 * v * v * v));
          return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
        };
        return OpCase{{dy, x}, {{"approximate", approximate}},
                      {make_tensor(dtype, shape, [&](int64_t i) { return element(dy, i) * slope(element(x, i)); })}};
      });
    }
  }
}

TEST_CASE("Kernels.LeakyRelu_and_LogicalNot.match_plain_loops") {
  runtime::Random rng(5);
  for (const double alpha : {0.2, 0.01, 1.5}) {
    for (const TensorShape& shape : kShapes) {
      CAPTURE(shape.to_string());
      check_op_at_every_dtype("LeakyRelu", [&](DType dtype) {
        Tensor x = random_of(rng, dtype, shape, -3, 3);
        // alpha is a 32-bit float attribute (as in TensorFlow), then in the dtype.
        const double slope = element(make_tensor(dtype, {}, [&](int64_t) { return static_cast<float>(alpha); }), 0);
        return OpCase{{x}, {{"alpha", alpha}}, {make_tensor(dtype, shape, [&](int64_t i) {
                        const double v = element(x, i);
                        return v > 0 ? v : v * slope;
                      })}};
      });
    }
  }
  for (const TensorShape& shape : kShapes) {
    check_op_at_every_dtype("LogicalNot", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, shape);
      return OpCase{{x}, {}, {make_tensor(dtype, shape, [&](int64_t i) { return element(x, i) == 0 ? 1.0 : 0.0; })}};
    });
  }
}

struct BinaryCase {
  const char* op;
  double (*reference)(double, double);
};

const BinaryCase kBinary[] = {
    {"Add", [](double a, double b) { return a + b; }},
    {"Sub", [](double a, double b) { return a - b; }},
    {"Mul", [](double a, double b) { return a * b; }},
    {"Div", [](double a, double b) { return a / b; }},
    {"Maximum", [](double a, double b) { return a < b ? b : a; }},
    {"Minimum", [](double a, double b) { return b < a ? b : a; }},
};

// out[i] for broadcast inputs, by explicit index arithmetic.
Tensor broadcast_reference(const Tensor& a, const Tensor& b, DType out_dtype,
                           const std::function<double(double, double)>& f) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out_dims(static_cast<size_t>(rank));
  auto dim_of = [rank](const Tensor& t, int d) { return d - (rank - t.rank()) >= 0 ? t.dim(d - (rank - t.rank())) : 1; };
  for (int d = 0; d < rank; ++d) out_dims[static_cast<size_t>(d)] = std::max(dim_of(a, d), dim_of(b, d));
  for (int d = 0; d < rank; ++d) {
    if (dim_of(a, d) == 0 || dim_of(b, d) == 0) out_dims[static_cast<size_t>(d)] = 0;
  }
  auto source_index = [&](const Tensor& t, const std::vector<int64_t>& index) {
    std::vector<int64_t> dims = t.shape().to_vector(), own(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) own[d] = dims[d] == 1 ? 0 : index[d + static_cast<size_t>(rank - t.rank())];
    return ravel(own, dims);
  };
  return make_tensor(out_dtype, TensorShape(out_dims), [&](int64_t i) {
    const auto index = unravel(i, out_dims);
    return f(element(a, source_index(a, index)), element(b, source_index(b, index)));
  });
}

const std::vector<std::pair<TensorShape, TensorShape>> kBroadcastPairs = {
    {{7, 5}, {7, 5}}, {{7, 5}, {5}},       {{5}, {7, 5}},        {{7, 1}, {1, 5}}, {{2, 3, 4}, {3, 1}},
    {{0, 3}, {3}},    {{0, 3}, {1, 3}},    {{}, {4, 3}},         {{4, 3}, {}},     {{1}, {1}},
    {{3, 1, 5}, {1, 4, 1}}, {{300, 200}, {200}},
};

TEST_CASE("Kernels.binary.match_reference_with_broadcasting") {
  runtime::Random rng(2);
  for (const BinaryCase& c : kBinary) {
    for (const auto& pair : kBroadcastPairs) {
      const TensorShape &sa = pair.first, &sb = pair.second;  // not structured bindings: lambdas take them
      const std::string shapes = sa.to_string() + " with " + sb.to_string();
      CAPTURE(shapes);
      // Divisors away from zero (integers in a small range; their quotients truncated by make_tensor).
      check_op_at_every_dtype(c.op, [&](DType dtype) {
        const bool integral = !graph::is_floating(dtype);
        Tensor a = random_of(rng, dtype, sa, integral ? -10 : -3, integral ? 10 : 3);
        Tensor b = random_of(rng, dtype, sb, integral ? 1 : 0.5, integral ? 6 : 3);
        return OpCase{{a, b}, {}, {broadcast_reference(a, b, dtype, c.reference)}};
      });
    }
  }
}

struct ComparisonCase {
  const char* op;
  bool (*reference)(double, double);
};

const ComparisonCase kComparisons[] = {
    {"Equal", [](double a, double b) { return a == b; }},     {"NotEqual", [](double a, double b) { return a != b; }},
    {"Less", [](double a, double b) { return a < b; }},       {"LessEqual", [](double a, double b) { return a <= b; }},
    {"Greater", [](double a, double b) { return a > b; }},    {"GreaterEqual", [](double a, double b) { return a >= b; }},
    {"LogicalAnd", [](double a, double b) { return a != 0 && b != 0; }},
    {"LogicalOr", [](double a, double b) { return a != 0 || b != 0; }},
};

// Pow over positive bases and any exponent, and over negative bases with whole exponents (real).
TEST_CASE("Kernels.Pow.matches_std_pow_with_broadcasting") {
  runtime::Random rng(6);
  for (const auto& pair : kBroadcastPairs) {
    const TensorShape &sa = pair.first, &sb = pair.second;
    for (const bool whole_exponents : {false, true}) {
      check_op_at_every_dtype("Pow", [&](DType dtype) {
        Tensor x = random_of(rng, dtype, sa, whole_exponents ? -3 : 0.1, 3);
        Tensor y = whole_exponents ? make_tensor(dtype, sb, [&](int64_t) { return std::floor(rng.uniform() * 7) - 3; })
                                   : random_of(rng, dtype, sb, -3, 3);
        // The reference in the dtype's own arithmetic: std::pow of floats rounds once from the exact power.
        const auto power = [&](double a, double b) {
          return dtype == DType::f32 ? static_cast<double>(std::pow(static_cast<float>(a), static_cast<float>(b))) : std::pow(a, b);
        };
        return OpCase{{x, y}, {}, {broadcast_reference(x, y, dtype, power)}};
      });
    }
  }
}

TEST_CASE("Kernels.comparisons.broadcast_to_bool") {
  runtime::Random rng(3);
  for (const ComparisonCase& c : kComparisons) {
    CAPTURE(c.op);
    for (const auto& pair : kBroadcastPairs) {
      const TensorShape &sa = pair.first, &sb = pair.second;  // not structured bindings: lambdas take them
      check_op_at_every_dtype(c.op, [&](DType dtype) {
        // Few distinct values, so that some are equal.
        Tensor a = make_tensor(dtype, sa, [&](int64_t) { return std::floor(rng.uniform() * 3); });
        Tensor b = make_tensor(dtype, sb, [&](int64_t) { return std::floor(rng.uniform() * 3); });
        return OpCase{{a, b}, {}, {broadcast_reference(a, b, DType::boolean, [&](double x, double y) { return c.reference(x, y); })}};
      });
    }
  }
}

TEST_CASE("Kernels.Div.integer_division_by_zero_is_an_error") {
  auto out = run_op("Div", {Tensor::from<int32_t>({2}, {4, 5}), Tensor::from<int32_t>({2}, {1, 0})});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("division by zero") != std::string::npos);
  // INT_MIN / -1 wraps instead of trapping.
  auto wrap = run_op("Div", {Tensor::from<int32_t>({1}, {INT32_MIN}), Tensor::from<int32_t>({1}, {-1})});
  REQUIRE(wrap.ok());
  CHECK((*wrap)[0].values<int32_t>()[0] == INT32_MIN);
}

TEST_CASE("Kernels.binary.incompatible_shapes_fail_when_the_node_is_added") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {3, 4});
  auto y = ops::placeholder(b, "y", DType::f32, {5});
  { auto scope = b.scope("layer"); (void)ops::add(b, x, y); }
  REQUIRE_FALSE(b.status().ok());
  CHECK(b.status().message() == "node 'layer/Add' (Add): shapes do not broadcast; inputs (f32[3,4], f32[5])");
}

// The shape a and b broadcast to (they must).
TensorShape broadcast_of(const TensorShape& a, const TensorShape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) {
    const int64_t da = d - (rank - a.rank()) >= 0 ? a.dim(d - (rank - a.rank())) : 1;
    const int64_t db = d - (rank - b.rank()) >= 0 ? b.dim(d - (rank - b.rank())) : 1;
    dims.push_back(da == 1 ? db : da);
  }
  return TensorShape(dims);
}

// SelectV2 at every dtype, its condition, then and else values broadcast against each other every way.
TEST_CASE("Kernels.SelectV2.broadcasts_its_three_operands") {
  runtime::Random rng(8);
  struct Case { TensorShape condition, then_value, else_value; };
  for (const Case& c : {Case{{4, 3}, {4, 3}, {4, 3}}, Case{{3}, {4, 3}, {4, 3}}, Case{{4, 1}, {1, 3}, {}}, Case{{}, {2, 3}, {3}},
                        Case{{2, 1, 3}, {4, 1}, {1, 4, 3}}, Case{{0, 3}, {3}, {1}}, Case{{1, 1, 5}, {2, 1, 1}, {3, 1}},
                        Case{{64, 65}, {64, 65}, {}}}) {
    const TensorShape out = broadcast_of(c.condition, broadcast_of(c.then_value, c.else_value));
    check_op_at_every_dtype("SelectV2", [&](DType dtype) {
      Tensor condition = random_of(rng, DType::boolean, c.condition);
      Tensor then_value = random_of(rng, dtype, c.then_value, -9, 9);
      Tensor else_value = random_of(rng, dtype, c.else_value, -9, 9);
      const std::vector<int64_t> out_dims = out.to_vector();
      const auto at = [&](const Tensor& t, const std::vector<int64_t>& index) {  // t's element at the broadcast index
        std::vector<int64_t> own;
        const int offset = static_cast<int>(index.size()) - t.rank();
        for (int d = 0; d < t.rank(); ++d) own.push_back(t.dim(d) == 1 ? 0 : index[static_cast<size_t>(d + offset)]);
        return element(t, ravel(own, t.shape().to_vector()));
      };
      Tensor want = make_tensor(dtype, out, [&](int64_t i) {
        const std::vector<int64_t> index = unravel(i, out_dims);
        return at(condition, index) != 0 ? at(then_value, index) : at(else_value, index);
      });
      return OpCase{{condition, then_value, else_value}, {}, {want}};
    });
  }
  const auto mismatched = run_op("SelectV2", {random_of(rng, DType::boolean, {2}), random_tensor<float>(rng, {3}), random_tensor<float>(rng, {3})}, {}, true);
  REQUIRE_FALSE(mismatched.ok());
}

}  // namespace
}  // namespace mirra::test
