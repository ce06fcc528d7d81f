// ReduceSum, ReduceMean, ReduceMax (axes, keep_dims, negative axes, all axes when the list is absent,
// none when it is empty, as in TensorFlow) and ArgMax against loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

using List = std::vector<int64_t>;

TEST_CASE("Kernels.reductions.match_reference") {
  runtime::Random rng(30);
  struct Case { TensorShape in; std::optional<List> axes; };  // nullopt: all axes
  const Case cases[] = {{{4, 5}, List{0}}, {{4, 5}, List{1}}, {{4, 5}, std::nullopt}, {{4, 5}, List{}},
                        {{2, 3, 4}, List{0, 2}}, {{2, 3, 4}, List{-1}}, {{2, 3, 4}, std::nullopt}, {{0, 3}, List{0}},
                        {{0, 3}, List{1}}, {{3, 1, 2}, List{1, 0}}, {{}, std::nullopt}, {{}, List{}}};
  const std::pair<const char*, int> ops[] = {{"ReduceSum", 0}, {"ReduceMean", 1}, {"ReduceMax", 2}};
  for (const Case& c : cases) {
    for (bool keep : {false, true}) {
      for (const auto& entry : ops) {
        const char* op = entry.first;
        const int kind = entry.second;
        CAPTURE(op); CAPTURE(c.in.to_string()); CAPTURE(keep);
        const List in_dims = c.in.to_vector();
        const int rank = c.in.rank();
        std::vector<bool> reduced(static_cast<size_t>(rank), !c.axes.has_value());
        for (int64_t a : c.axes.value_or(List{})) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
        List out_dims;
        for (int d = 0; d < rank; ++d) {
          if (!reduced[static_cast<size_t>(d)]) out_dims.push_back(in_dims[static_cast<size_t>(d)]);
          else if (keep) out_dims.push_back(1);
        }
        const int64_t out_count = TensorShape(out_dims).num_elements();
        // Max and mean over nothing have no reference here (-inf / 0/0); see the test below.
        if (kind != 0 && c.in.num_elements() == 0 && out_count > 0) continue;
        check_op_at_every_dtype(op, [&](DType dtype) {
          Tensor x = random_of(rng, dtype, c.in, -10, 10);
          std::vector<double> acc(static_cast<size_t>(out_count), kind == 2 ? -std::numeric_limits<double>::infinity() : 0.0);
          std::vector<int64_t> count(static_cast<size_t>(out_count), 0);
          for (int64_t i = 0; i < x.num_elements(); ++i) {
            const List index = unravel(i, in_dims);
            List out_index;
            for (int d = 0; d < rank; ++d) {
              if (!reduced[static_cast<size_t>(d)]) out_index.push_back(index[static_cast<size_t>(d)]);
              else if (keep) out_index.push_back(0);
            }
            const auto o = static_cast<size_t>(ravel(out_index, out_dims));
            acc[o] = kind == 2 ? std::max(acc[o], element(x, i)) : acc[o] + element(x, i);
            ++count[o];
          }
          // Integer means truncate (make_tensor's conversion).
          Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t o) {
            const auto k = static_cast<size_t>(o);
            return kind == 1 ? acc[k] / static_cast<double>(count[k]) : acc[k];
          });
          graph::AttrMap attrs = {{"keep_dims", keep}};
          if (c.axes) attrs.set("axes", *c.axes);
          return OpCase{{x}, attrs, {want}};
        });
      }
    }
  }
}

// TensorFlow's identities (tf_reference/cases.json checks them against TensorFlow too).
TEST_CASE("Kernels.reductions.over_nothing") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const List& axes : {List{0}, List{0, 1}}) {  // the leading-dims path and the general one
    auto max = run_op("ReduceMax", {Tensor::from<float>({0, 2}, {})}, {{"axes", axes}});
    REQUIRE(max.ok());
    CHECK((*max)[0].to_vector<float>() == std::vector<float>((*max)[0].num_elements(), -inf));
    auto max_int = run_op("ReduceMax", {Tensor::from<int32_t>({0, 2}, {})}, {{"axes", axes}});
    REQUIRE(max_int.ok());
    CHECK((*max_int)[0].to_vector<int32_t>() == std::vector<int32_t>((*max_int)[0].num_elements(), std::numeric_limits<int32_t>::lowest()));
    auto mean_int = run_op("ReduceMean", {Tensor::from<int64_t>({0, 2}, {})}, {{"axes", axes}});
    REQUIRE(mean_int.ok());
    CHECK((*mean_int)[0].to_vector<int64_t>() == std::vector<int64_t>((*mean_int)[0].num_elements(), 0));
    auto mean = run_op("ReduceMean", {Tensor::from<double>({0, 2}, {})}, {{"axes", axes}});
    REQUIRE(mean.ok());
    for (double v : (*mean)[0].to_vector<double>()) CHECK(std::isnan(v));
  }
}

TEST_CASE("Kernels.ArgMax.first_largest_along_axis") {
  runtime::Random rng(31);
  for (const auto& c : std::vector<std::pair<TensorShape, int64_t>>{
           {{4, 5}, 1}, {{4, 5}, 0}, {{2, 3, 4}, 1}, {{0, 10}, 1}, {{3, 1}, -1}}) {
    const TensorShape& shape = c.first;  // not structured bindings: the lambda below takes them
    const int64_t axis = c.second;
    const List dims = shape.to_vector();
    const int a = static_cast<int>(axis < 0 ? axis + shape.rank() : axis);
    List out_dims;
    for (int d = 0; d < shape.rank(); ++d) if (d != a) out_dims.push_back(dims[static_cast<size_t>(d)]);
    check_op_at_every_dtype("ArgMax", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, shape, 0, 4);  // ties happen
      Tensor want = make_tensor(DType::i64, TensorShape(out_dims), [&](int64_t o) {
        List out_index = unravel(o, out_dims);
        List index = out_index;
        index.insert(index.begin() + a, 0);
        int64_t best = 0;
        for (int64_t i = 0; i < dims[static_cast<size_t>(a)]; ++i) {
          index[static_cast<size_t>(a)] = i;
          List best_index = index;
          best_index[static_cast<size_t>(a)] = best;
          if (element(x, ravel(index, dims)) > element(x, ravel(best_index, dims))) best = i;
        }
        return static_cast<double>(best);
      });
      return OpCase{{x}, {{"axis", axis}}, {want}};
    });
  }
}

}  // namespace
}  // namespace mirra::test
