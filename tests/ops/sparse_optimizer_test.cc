// Row-wise updates (SparseApplyGradientDescent, SparseApplyMomentum, SparseApplyAdam) against their
// formulas in plain loops: rows of one index added in their order, negative indices dropped, the rows
// not named untouched with their slots, the gate closed changing nothing; gradient descent by rows
// equal, bit for bit, to ApplyGradientDescent on the rows' UnsortedSegmentSum; an index past the
// variable's rows and rows of the wrong shape are errors.
#include <cmath>
#include <functional>
#include <map>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

constexpr int64_t kRows = 6, kWidth = 3;
// Index 4 twice, 0 once, a dropped -1, and 1 twice (so rows 2, 3 and 5 are not named).
const std::vector<int64_t> kIndices = {4, 0, -1, 4, 1, 1};

Tensor scalar(DType dtype, double value) { return make_tensor(dtype, {}, [&](int64_t) { return value; }); }

Tensor indices_of(DType dtype) {
  return make_tensor(dtype, {static_cast<int64_t>(kIndices.size())},
                     [](int64_t i) { return static_cast<double>(kIndices[static_cast<size_t>(i)]); });
}

// Each named row's summed gradient, adding its rows in their order.
std::map<int64_t, std::vector<double>> summed_rows(const Tensor& rows) {
  std::map<int64_t, std::vector<double>> sums;
  for (size_t k = 0; k < kIndices.size(); ++k) {
    if (kIndices[k] < 0) continue;
    std::vector<double>& sum = sums.try_emplace(kIndices[k], std::vector<double>(kWidth, 0.0)).first->second;
    for (int64_t c = 0; c < kWidth; ++c) sum[static_cast<size_t>(c)] += element(rows, static_cast<int64_t>(k) * kWidth + c);
  }
  return sums;
}

// `state` with each named row's elements replaced by update(row, column, its summed gradient).
Tensor with_rows_updated(const Tensor& state, const std::map<int64_t, std::vector<double>>& sums,
                         const std::function<double(int64_t, double)>& update) {
  return make_tensor(state.dtype(), state.shape(), [&](int64_t i) {
    const auto found = sums.find(i / kWidth);
    return found == sums.end() ? element(state, i) : update(i, found->second[static_cast<size_t>(i % kWidth)]);
  });
}

TEST_CASE("Kernels.sparse_updates.at_every_dtype") {
  runtime::Random rng(11);
  const TensorShape shape{kRows, kWidth};
  const TensorShape rows_shape{static_cast<int64_t>(kIndices.size()), kWidth};
  const double lr = 0.1;
  for (const DType index_dtype : {DType::i64, DType::i32}) {
    CAPTURE(graph::dtype_name(index_dtype));
    for (const bool open : {true, false}) {
      CAPTURE(open);
      const Tensor gate = Tensor::scalar<bool>(open);
      check_op_at_every_dtype("SparseApplyGradientDescent", [&](DType dtype) {
        const Tensor v = random_of(rng, dtype, shape, -4, 4), rows = random_of(rng, dtype, rows_shape, -4, 4);
        const auto sums = summed_rows(rows);
        return OpCase{.inputs = {v, rows, indices_of(index_dtype), scalar(dtype, lr), gate},
                      .expected = {open ? with_rows_updated(v, sums, [&](int64_t i, double g) { return element(v, i) - lr * g; }) : v},
                      .variables = 1};
      });
      for (const bool nesterov : {false, true}) {
        check_op_at_every_dtype("SparseApplyMomentum", [&](DType dtype) {
          const double momentum = 0.9;
          const Tensor v = random_of(rng, dtype, shape), a = random_of(rng, dtype, shape), rows = random_of(rng, dtype, rows_shape);
          const auto sums = summed_rows(rows);
          const auto accumulated = [&](int64_t i, double g) { return momentum * element(a, i) + g; };
          const Tensor a2 = with_rows_updated(a, sums, accumulated);
          const Tensor v2 = with_rows_updated(v, sums, [&](int64_t i, double g) {
            return element(v, i) - lr * (nesterov ? g + momentum * accumulated(i, g) : accumulated(i, g));
          });
          return OpCase{.inputs = {v, a, rows, indices_of(index_dtype), scalar(dtype, lr), gate},
                        .attrs = {{"momentum", momentum}, {"use_nesterov", nesterov}},
                        .expected = {open ? v2 : v, open ? a2 : a},
                        .variables = 2};
        });
      }
      check_op_at_every_dtype("SparseApplyAdam", [&](DType dtype) {
        const double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7;
        const int64_t done = 3;  // updates already applied: this is update 4
        const Tensor v = random_of(rng, dtype, shape), m = random_of(rng, dtype, shape), s = random_of(rng, dtype, shape, 0, 1);
        const Tensor rows = random_of(rng, dtype, rows_shape);
        const auto sums = summed_rows(rows);
        const auto m_of = [&](int64_t i, double g) { return beta1 * element(m, i) + (1 - beta1) * g; };
        const auto s_of = [&](int64_t i, double g) { return beta2 * element(s, i) + (1 - beta2) * g * g; };
        const Tensor v2 = with_rows_updated(v, sums, [&](int64_t i, double g) {
          const double m_hat = m_of(i, g) / (1 - std::pow(beta1, done + 1)), s_hat = s_of(i, g) / (1 - std::pow(beta2, done + 1));
          return element(v, i) - lr * m_hat / (std::sqrt(s_hat) + epsilon);
        });
        return OpCase{.inputs = {v, m, s, rows, indices_of(index_dtype), scalar(dtype, lr), Tensor::scalar<int64_t>(done), gate},
                      .attrs = {{"beta1", beta1}, {"beta2", beta2}, {"epsilon", epsilon}},
                      .expected = {open ? v2 : v, open ? with_rows_updated(m, sums, m_of) : m,
                                   open ? with_rows_updated(s, sums, s_of) : s},
                      .variables = 3};
      });
    }
  }
}

// The dense update of the scattered rows and the row-wise one write the same bits.
TEST_CASE("Kernels.sparse_updates.gradient_descent_by_rows_equals_the_dense_update_of_their_scatter") {
  runtime::Random rng(5);
  for (const DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(graph::dtype_name(dtype));
    const Tensor v = random_of(rng, dtype, {kRows, kWidth}, -4, 4);
    const Tensor rows = random_of(rng, dtype, {static_cast<int64_t>(kIndices.size()), kWidth}, -4, 4);
    auto scattered = run_op("UnsortedSegmentSum", {rows, indices_of(DType::i64)}, {{"num_segments", kRows}});
    REQUIRE_MESSAGE(scattered.ok(), scattered.status().to_string());
    auto dense = run_op("ApplyGradientDescent", {v, (*scattered)[0], scalar(dtype, 0.1)}, {}, false, {}, 1);
    auto sparse = run_op("SparseApplyGradientDescent", {v, rows, indices_of(DType::i64), scalar(dtype, 0.1)}, {}, false, {}, 1);
    REQUIRE_MESSAGE(dense.ok(), dense.status().to_string());
    REQUIRE_MESSAGE(sparse.ok(), sparse.status().to_string());
    for (int64_t i = 0; i < kRows * kWidth; ++i) CHECK(element((*sparse)[0], i) == element((*dense)[0], i));
  }
}

TEST_CASE("Kernels.sparse_updates.refuse_an_index_past_the_rows_and_rows_or_slots_of_another_shape") {
  const Tensor v = make_tensor(DType::f32, {kRows, kWidth}, [](int64_t) { return 1.0; });
  const Tensor rows = make_tensor(DType::f32, {2, kWidth}, [](int64_t) { return 1.0; });
  const Tensor past = make_tensor(DType::i64, {2}, [](int64_t i) { return i == 0 ? 1.0 : static_cast<double>(kRows); });
  auto out = run_op("SparseApplyGradientDescent", {v, rows, past, scalar(DType::f32, 0.1)}, {}, false, {}, 1);
  REQUIRE_FALSE(out.ok());
  CHECK_MESSAGE(out.status().message().find("indices[1] = 6 is not in [0, 6)") != std::string::npos, out.status().to_string());
  const Tensor three = make_tensor(DType::i64, {3}, [](int64_t) { return 0.0; });
  out = run_op("SparseApplyGradientDescent", {v, rows, three, scalar(DType::f32, 0.1)}, {}, false, {}, 1);
  REQUIRE_FALSE(out.ok());
  CHECK_MESSAGE(out.status().message().find("rows must be") != std::string::npos, out.status().to_string());
  const Tensor short_slot = make_tensor(DType::f32, {kRows - 1, kWidth}, [](int64_t) { return 0.0; });
  const Tensor two = make_tensor(DType::i64, {2}, [](int64_t i) { return static_cast<double>(i); });
  out = run_op("SparseApplyMomentum", {v, short_slot, rows, two, scalar(DType::f32, 0.1)}, {{"momentum", 0.9}}, false, {}, 1);
  REQUIRE_FALSE(out.ok());
  CHECK_MESSAGE(out.status().message().find("slot 1 must have the variable's dtype and shape") != std::string::npos,
                out.status().to_string());
}

}  // namespace
}  // namespace mirra::test
