// Reshape, ExpandDims, Squeeze, Transpose, Tile, Identity, Cast, OneHot, Concat, Split, Slice and Pad
// against index arithmetic,
// at every dtype their schemas accept and on zero-size batches; run-time shape errors name the problem.
#include <cmath>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

using List = std::vector<int64_t>;

TEST_CASE("Kernels.Reshape.keeps_elements_and_resolves_minus_one") {
  runtime::Random rng(20);
  struct Case { TensorShape in; List target; TensorShape out; };
  for (const Case& c : {Case{{6, 4}, {-1, 2}, {12, 2}}, Case{{0, 4}, {-1, 2, 2}, {0, 2, 2}}, Case{{2, 3, 4}, {24}, {24}},
                        Case{{1}, {}, {}}, Case{{5, 28, 28, 1}, {-1, 784}, {5, 784}}}) {
    check_op_at_every_dtype("Reshape", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.in, -9, 9);
      return OpCase{{x}, {{"shape", c.target}}, {make_tensor(dtype, c.out, [&](int64_t i) { return element(x, i); })}};
    });
  }
  auto bad = run_op("Reshape", {Tensor::from<float>({5}, {1, 2, 3, 4, 5})}, {{"shape", List{-1, 2}}}, true);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("cannot reshape f32[5] to [-1,2]") != std::string::npos);
}

TEST_CASE("Kernels.Transpose.permutes_dims") {
  runtime::Random rng(21);
  struct Case { TensorShape in; List perm; };
  for (const Case& c : {Case{{3, 4}, {1, 0}}, Case{{2, 3, 4}, {2, 0, 1}}, Case{{0, 3, 2}, {0, 2, 1}}, Case{{2, 3, 4, 5}, {0, 3, 1, 2}},
                        Case{{5}, {0}}}) {
    check_op_at_every_dtype("Transpose", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.in, 0, 100);
      const List in_dims = c.in.to_vector();
      List out_dims;
      for (int64_t p : c.perm) out_dims.push_back(in_dims[static_cast<size_t>(p)]);
      Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
        const List out_index = unravel(i, out_dims);
        List in_index(in_dims.size());
        for (size_t d = 0; d < c.perm.size(); ++d) in_index[static_cast<size_t>(c.perm[d])] = out_index[d];
        return element(x, ravel(in_index, in_dims));
      });
      return OpCase{{x}, {{"perm", c.perm}}, {want}};
    });
  }
}

TEST_CASE("Kernels.Identity_Cast_and_copies.convert_every_dtype") {
  runtime::Random rng(22);
  for (const TensorShape& shape : {TensorShape{0, 3}, TensorShape{7, 3}}) {
    for (const char* op : {"Identity", "CopyToHost", "CopyFromHost"}) {
      check_op_at_every_dtype(op, [&](DType dtype) {
        Tensor x = random_of(rng, dtype, shape, 0, 6);
        return OpCase{{x}, {}, {x}};
      });
    }
    // Small whole numbers, which every dtype holds exactly.
    for (DType to : kAllDtypes) {
      CAPTURE(graph::dtype_name(to));
      check_op_at_every_dtype("Cast", [&](DType from) {
        Tensor x = random_of(rng, from, shape, 0, 6);
        return OpCase{{x}, {{"dtype", to}}, {make_tensor(to, shape, [&](int64_t i) { return element(x, i); })}};
      });
    }
  }
  // Floats to integers saturate, and NaN becomes 0.
  auto out = run_op("Cast", {Tensor::from<float>({3}, {1e20f, -1e20f, std::nanf("")})}, {{"dtype", DType::i32}});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<int32_t>() == std::vector<int32_t>{INT32_MAX, INT32_MIN, 0});
}

// The 16-bit floats: from every other dtype and back, rounded as graph::bfloat16 and graph::float16
// round (tests/graph/float16_test.cc holds those against their definitions); f64 goes through f32.
// Each backend under test converts as the CPU does.
TEST_CASE("Kernels.Cast.to_and_from_bf16_and_f16") {
  const std::vector<float> values = {0.0f, -0.0f, 1.0f / 3, -2.5f, 1e-6f, 70000.0f, 3.0e38f, std::nanf(""), 5.0f};
  const Tensor x = Tensor::from<float>({static_cast<int64_t>(values.size())}, std::span<const float>(values));
  for (DType half : {DType::bf16, DType::f16}) {
    CAPTURE(graph::dtype_name(half));
    auto narrowed = run_op("Cast", {x}, {{"dtype", half}});
    REQUIRE_MESSAGE(narrowed.ok(), narrowed.status().to_string());
    REQUIRE((*narrowed)[0].dtype() == half);
    auto widened = run_op("Cast", {(*narrowed)[0]}, {{"dtype", DType::f32}});
    REQUIRE(widened.ok());
    const std::vector<float> back = (*widened)[0].to_vector<float>();
    for (size_t i = 0; i < values.size(); ++i) {
      CAPTURE(values[i]);
      const float want = half == DType::bf16 ? static_cast<float>(graph::bfloat16(values[i]))
                                             : static_cast<float>(graph::float16(values[i]));
      if (std::isnan(want)) {
        CHECK(std::isnan(back[i]));
      } else {
        CHECK(back[i] == want);
      }
    }
    // Each backend under test rounds as the CPU does, both ways (finite values: NaN payloads may differ).
    const Tensor finite = Tensor::from<float>({5}, {1.0f / 3, -2.5f, 1e-6f, 70000.0f, 3.0e38f});
    auto rounded = run_op("Cast", {finite}, {{"dtype", half}});
    REQUIRE(rounded.ok());
    check_op("Cast", {finite}, {{"dtype", half}}, *rounded, 0);
    auto back_to_f32 = run_op("Cast", {(*rounded)[0]}, {{"dtype", DType::f32}});
    REQUIRE(back_to_f32.ok());
    check_op("Cast", {(*rounded)[0]}, {{"dtype", DType::f32}}, *back_to_f32, 0);
    // Small integers are exact in both: through every dtype and back.
    for (DType other : {DType::f64, DType::i32, DType::i64, DType::u8, DType::boolean, DType::bf16, DType::f16}) {
      CAPTURE(graph::dtype_name(other));
      const Tensor counts = make_tensor(DType::f32, {6}, [](int64_t i) { return static_cast<double>(i); });
      auto there = run_op("Cast", {counts}, {{"dtype", half}});
      REQUIRE(there.ok());
      auto across = run_op("Cast", {(*there)[0]}, {{"dtype", other}});
      REQUIRE_MESSAGE(across.ok(), across.status().to_string());
      auto home = run_op("Cast", {(*across)[0]}, {{"dtype", DType::f32}});
      REQUIRE(home.ok());
      const std::vector<float> got = (*home)[0].to_vector<float>();
      for (int64_t i = 0; i < 6; ++i) CHECK(got[static_cast<size_t>(i)] == (other == DType::boolean ? (i != 0) : i));
    }
  }
  // An op that takes no 16-bit floats refuses them, naming the dtype.
  const Tensor h = Tensor::from<graph::bfloat16>({1}, {graph::bfloat16(1.0f)});
  auto sum = run_op("Add", {h, h}, {});
  REQUIRE_FALSE(sum.ok());
  CAPTURE(sum.status().to_string());
  CHECK(sum.status().message().find("bf16") != std::string::npos);
}

TEST_CASE("Kernels.OneHot.sets_on_value_at_each_index") {
  const int64_t depth = 4;
  // Every index dtype, then every output dtype.
  const auto one_hot_case = [&](DType index_type, DType output_type) {
    Tensor indices = make_tensor(index_type, {6}, [](int64_t i) { return static_cast<double>(i % 5); });
    Tensor want = make_tensor(output_type, {6, depth}, [&](int64_t i) {
      return i % depth == static_cast<int64_t>(element(indices, i / depth)) ? 2.0 : 0.0;
    });
    return OpCase{{indices}, {{"depth", depth}, {"on_value", 2.0}, {"off_value", 0.0}, {"dtype", output_type}}, {want}};
  };
  check_op_at_every_dtype("OneHot", [&](DType index_type) { return one_hot_case(index_type, DType::f32); });
  check_op_at_every_dtype("OneHot", [&](DType output_type) { return one_hot_case(DType::i64, output_type); });
  for (DType index_type : {DType::i32, DType::i64}) {
    Tensor indices = make_tensor(index_type, {6}, [](int64_t i) { return static_cast<double>(i) - 1; });  // -1 .. 4
    Tensor want = make_tensor(DType::f32, {6, depth}, [&](int64_t i) { return i % depth == i / depth - 1 ? 2.0 : -1.0; });
    check_op("OneHot", {indices}, {{"depth", depth}, {"on_value", 2.0}, {"off_value", -1.0}}, {want});
    check_op("OneHot", {make_tensor(index_type, {0}, [](int64_t) { return 0.0; })}, {{"depth", depth}},
             {make_tensor(DType::f32, {0, depth}, [](int64_t) { return 0.0; })});
  }
}

TEST_CASE("Kernels.Concat_and_Split.join_and_cut_along_an_axis") {
  runtime::Random rng(23);
  for (int64_t axis : {0, 1, -1}) {
    for (int64_t batch : {0, 3}) {
      const TensorShape sa{batch, 2, 3}, sb{batch, 2, 3};
      const int norm = static_cast<int>(axis < 0 ? axis + 3 : axis);
      List out_dims = sa.to_vector();
      out_dims[static_cast<size_t>(norm)] *= 2;
      for (const bool split : {false, true}) {
        if (split && norm == 0) continue;
        check_op_at_every_dtype(split ? "Split" : "Concat", [&](DType dtype) {
          Tensor a = random_of(rng, dtype, sa, -9, 9), b = random_of(rng, dtype, sb, -9, 9);
          Tensor joined = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
            List index = unravel(i, out_dims);
            const int64_t half = sa.dim(norm);
            const Tensor& source = index[static_cast<size_t>(norm)] < half ? a : b;
            index[static_cast<size_t>(norm)] %= half;
            return element(source, ravel(index, sa.to_vector()));
          });
          if (split) return OpCase{{joined}, {{"axis", axis}, {"num_split", int64_t{2}}}, {a, b}};
          return OpCase{{a, b}, {{"axis", axis}}, {joined}};
        });
      }
    }
  }
  Tensor three = random_tensor<float>(rng, {9, 2});
  check_op("Split", {three}, {{"axis", int64_t{0}}, {"num_split", int64_t{3}}},
           {make_tensor(DType::f32, {3, 2}, [&](int64_t i) { return element(three, i); }),
            make_tensor(DType::f32, {3, 2}, [&](int64_t i) { return element(three, 6 + i); }),
            make_tensor(DType::f32, {3, 2}, [&](int64_t i) { return element(three, 12 + i); })});
  auto uneven = run_op("Split", {random_tensor<float>(rng, {5, 2})}, {{"axis", int64_t{0}}, {"num_split", int64_t{2}}}, true);
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.status().message().find("does not split into 2 equal parts") != std::string::npos);
}

TEST_CASE("Kernels.Slice_and_Pad.copy_boxes") {
  runtime::Random rng(24);
  struct Case { TensorShape in; List begin, size; };
  for (const Case& c : {Case{{5, 4}, {1, 1}, {3, -1}}, Case{{0, 4}, {0, 2}, {-1, 2}}, Case{{2, 3, 4}, {1, 0, 3}, {1, 3, 1}},
                        Case{{3}, {3}, {0}}, Case{{4, 300, 17}, {1, 7, 2}, {2, 290, 13}}}) {
    const List in_dims = c.in.to_vector();
    List out_dims;
    for (size_t d = 0; d < in_dims.size(); ++d) out_dims.push_back(c.size[d] < 0 ? in_dims[d] - c.begin[d] : c.size[d]);
    check_op_at_every_dtype("Slice", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.in, -9, 9);
      Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
        List index = unravel(i, out_dims);
        for (size_t d = 0; d < index.size(); ++d) index[d] += c.begin[d];
        return element(x, ravel(index, in_dims));
      });
      return OpCase{{x}, {{"begin", c.begin}, {"size", c.size}}, {want}};
    });
  }
  // A scalar, an empty last dim, and rows enough to be written in several parallel chunks.
  for (const TensorShape& shape : {TensorShape{2, 3}, TensorShape{0, 2}, TensorShape{1, 2, 2, 1}, TensorShape{},
                                   TensorShape{3}, TensorShape{2, 0}, TensorShape{4, 300, 17}}) {
    List paddings;
    for (int d = 0; d < shape.rank(); ++d) { paddings.push_back(d % 2); paddings.push_back(2 - d % 2); }
    List out_dims = shape.to_vector();
    for (size_t d = 0; d < out_dims.size(); ++d) out_dims[d] += paddings[2 * d] + paddings[2 * d + 1];
    check_op_at_every_dtype("Pad", [&](DType dtype) {
      Tensor x = make_tensor(dtype, shape, [&](int64_t i) { return static_cast<double>(i % 5 + 1); });
      Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
        List index = unravel(i, out_dims);
        for (size_t d = 0; d < index.size(); ++d) {
          index[d] -= paddings[2 * d];
          if (index[d] < 0 || index[d] >= shape.dim(static_cast<int>(d))) return 7.0;
        }
        return element(x, ravel(index, shape.to_vector()));
      });
      return OpCase{{x}, {{"paddings", paddings}, {"constant_value", 7.0}}, {want}};
    });
  }
  auto outside = run_op("Slice", {random_tensor<float>(rng, {2, 2})}, {{"begin", List{1, 0}}, {"size", List{2, 2}}}, true);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().message().find("is outside f32[2,2]") != std::string::npos);
}

TEST_CASE("Kernels.ExpandDims_and_Squeeze.insert_and_remove_ones") {
  runtime::Random rng(25);
  struct Case { TensorShape in; int64_t axis; TensorShape out; };
  for (const Case& c : {Case{{2, 3}, 0, {1, 2, 3}}, Case{{2, 3}, 2, {2, 3, 1}}, Case{{2, 3}, -1, {2, 3, 1}}, Case{{2, 3}, -3, {1, 2, 3}},
                        Case{{}, 0, {1}}, Case{{0, 4}, 1, {0, 1, 4}}}) {
    check_op_at_every_dtype("ExpandDims", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.in, -9, 9);
      return OpCase{{x}, {{"axis", c.axis}}, {make_tensor(dtype, c.out, [&](int64_t i) { return element(x, i); })}};
    });
  }
  struct SqueezeCase { TensorShape in; List axes; TensorShape out; };
  for (const SqueezeCase& c : {SqueezeCase{{1, 2, 1, 3, 1}, {2}, {1, 2, 3, 1}}, SqueezeCase{{1, 2, 1, 3, 1}, {0, -1}, {2, 1, 3}},
                               SqueezeCase{{0, 1}, {1}, {0}}, SqueezeCase{{4, 1, 1}, {-2, 2}, {4}}}) {
    check_op_at_every_dtype("Squeeze", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.in, -9, 9);
      return OpCase{{x}, {{"axis", c.axes}}, {make_tensor(dtype, c.out, [&](int64_t i) { return element(x, i); })}};
    });
  }
  // Without axes, every dim of 1 goes; the graph must know them all (it cannot know the output's rank
  // otherwise).
  for (const SqueezeCase& c : {SqueezeCase{{1, 2, 1, 3, 1}, {}, {2, 3}}, SqueezeCase{{1}, {}, {}}, SqueezeCase{{2, 3}, {}, {2, 3}}}) {
    const Tensor x = random_tensor<float>(rng, c.in);
    const auto squeezed = run_op("Squeeze", {x}, {});
    REQUIRE_MESSAGE(squeezed.ok(), squeezed.status().to_string());
    check_elements((*squeezed)[0], x.reshaped(c.out), 0);
  }
  const auto unknown = run_op("Squeeze", {random_tensor<float>(rng, {1, 2})}, {}, true);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("needs known dims") != std::string::npos);
  // A named dim that is not 1 at run time (the graph left it unknown) is an error naming it.
  const auto not_one = run_op("Squeeze", {random_tensor<float>(rng, {3, 2})}, {{"axis", List{0}}}, true);
  REQUIRE_FALSE(not_one.ok());
  CHECK(not_one.status().message().find("cannot squeeze dim 0 of [3,2]") != std::string::npos);
}

TEST_CASE("Kernels.Tile.repeats_along_each_dim") {
  runtime::Random rng(26);
  struct Case { TensorShape in; List multiples; };
  for (const Case& c : {Case{{2, 3}, {1, 1}}, Case{{2, 3}, {2, 1}}, Case{{2, 3}, {1, 3}}, Case{{2, 1, 3}, {2, 4, 2}}, Case{{}, {}},
                        Case{{3}, {0}}, Case{{0, 2}, {3, 2}}, Case{{1, 1}, {5, 7}}, Case{{2, 2, 2, 2, 2}, {2, 1, 2, 1, 2}},
                        Case{{40, 33}, {3, 2}}}) {
    const List in_dims = c.in.to_vector();
    List out_dims = in_dims;
    for (size_t d = 0; d < out_dims.size(); ++d) out_dims[d] *= c.multiples[d];
    check_op_at_every_dtype("Tile", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.in, -9, 9);
      Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
        List index = unravel(i, out_dims);
        for (size_t d = 0; d < index.size(); ++d) index[d] %= in_dims[d];
        return element(x, ravel(index, in_dims));
      });
      return OpCase{{x}, {{"multiples", c.multiples}}, {want}};
    });
  }
}

}  // namespace
}  // namespace mirra::test
