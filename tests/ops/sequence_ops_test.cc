// The ops sequence models are built from, against plain loops: GatherV2 (every axis, index ranks,
// errors), UnsortedSegmentSum (dropped negative ids, empty segments, the order of its sums),
// BatchMatMulV2 (adjoints, broadcast batch dims, 16-bit operands), LayerNorm with its gradient op, and
// Dropout (Philox against its published answers; masks by example key, whatever the batch's split).
#include <cmath>

#include "ops/philox.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Kernels.GatherV2.picks_slices_along_the_axis") {
  runtime::Random rng(40);
  struct Case {
    TensorShape params;
    TensorShape indices;
    int64_t axis;
  };
  for (const Case& c : {Case{{5, 3}, {4}, 0}, Case{{5, 3}, {2, 3}, 0}, Case{{2, 5, 3}, {4}, 1}, Case{{2, 3, 5}, {2, 2}, -1},
                        Case{{5}, {}, 0}, Case{{4, 3}, {0}, 0}, Case{{0, 3}, {0}, 0}, Case{{3, 0}, {2}, 0}}) {
    CAPTURE(c.params.to_string());
    CAPTURE(c.indices.to_string());
    const int rank = c.params.rank();
    const int axis = static_cast<int>(c.axis < 0 ? c.axis + rank : c.axis);
    const int64_t size = c.params.dim(axis);
    for (DType index_dtype : {DType::i32, DType::i64}) {
      const Tensor indices = make_tensor(index_dtype, c.indices, [&](int64_t) { return static_cast<double>(rng.below(size)); });
      check_op_at_every_dtype("GatherV2", [&](DType dtype) {
        const Tensor params = random_of(rng, dtype, c.params, -4, 4);
        const std::vector<int64_t> params_dims = c.params.to_vector();
        std::vector<int64_t> out_dims(params_dims.begin(), params_dims.begin() + axis);
        for (int64_t d : c.indices.to_vector()) out_dims.push_back(d);
        for (int d = axis + 1; d < rank; ++d) out_dims.push_back(c.params.dim(d));
        const int index_rank = c.indices.rank();
        const Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
          const std::vector<int64_t> at = unravel(i, out_dims);
          std::vector<int64_t> from(at.begin(), at.begin() + axis);
          const std::vector<int64_t> index_at(at.begin() + axis, at.begin() + axis + index_rank);
          from.push_back(static_cast<int64_t>(element(indices, ravel(index_at, c.indices.to_vector()))));
          from.insert(from.end(), at.begin() + axis + index_rank, at.end());
          return element(params, ravel(from, c.params.to_vector()));
        });
        return OpCase{{params, indices}, {{"axis", c.axis}}, {want}};
      });
    }
  }
}

TEST_CASE("Kernels.GatherV2.refuses_an_index_out_of_range") {
  const Tensor params = Tensor::from<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  for (int64_t bad : {int64_t{3}, int64_t{-1}}) {
    auto out = run_op("GatherV2", {params, Tensor::from<int64_t>({2}, {0, bad})});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("indices[1] = " + std::to_string(bad) + " is not in [0, 3)") != std::string::npos);
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto p = ops::placeholder(b, "p", DType::f32, {3, 2});
  ops::gather(b, p, ops::placeholder(b, "i", DType::f32, {2}));
  CHECK_FALSE(b.status().ok());
  graph::Graph g2;
  graph::Builder b2(g2, ops::registry());
  ops::gather(b2, ops::placeholder(b2, "p", DType::f32, {3, 2}), ops::placeholder(b2, "i", DType::i32, {2}), 2);
  CHECK(b2.status().message().find("axis 2 is out of range") != std::string::npos);
}

TEST_CASE("Kernels.UnsortedSegmentSum.adds_rows_by_id_in_order") {
  runtime::Random rng(41);
  struct Case {
    TensorShape data;
    TensorShape ids;
    int64_t segments;
  };
  for (const Case& c : {Case{{6, 3}, {6}, 4}, Case{{2, 3, 4}, {2, 3}, 5}, Case{{7}, {7}, 3}, Case{{0, 2}, {0}, 3},
                        Case{{5, 2}, {5}, 0}, Case{{40, 70}, {40}, 9}}) {
    CAPTURE(c.data.to_string());
    const bool any_segment = c.segments > 0;
    const Tensor ids = make_tensor(DType::i64, c.ids, [&](int64_t) {
      return any_segment ? static_cast<double>(static_cast<int64_t>(rng.below(static_cast<uint64_t>(c.segments) + 1)) - 1) : -1.0;
    });
    const int64_t rows = c.ids.num_elements();
    const int64_t inner = rows == 0 ? c.data.dim(c.data.rank() - 1) : c.data.num_elements() / rows;
    check_op_at_every_dtype("UnsortedSegmentSum", [&](DType dtype) {
      const Tensor data = random_of(rng, dtype, c.data, -4, 4);
      std::vector<int64_t> out_dims{c.segments};
      for (int d = c.ids.rank(); d < c.data.rank(); ++d) out_dims.push_back(c.data.dim(d));
      const Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
        const int64_t s = i / inner, col = i % inner;
        double sum = 0;
        for (int64_t r = 0; r < rows; ++r) {
          if (static_cast<int64_t>(element(ids, r)) == s) sum += element(data, r * inner + col);
        }
        return sum;
      });
      return OpCase{{data, ids}, {{"num_segments", c.segments}}, {want}};
    });
  }
  auto out = run_op("UnsortedSegmentSum", {Tensor::from<float>({2}, {1, 2}), Tensor::from<int32_t>({2}, {0, 3})},
                    {{"num_segments", int64_t{3}}});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("segment_ids[1] = 3 is not in [0, 3)") != std::string::npos);
}

// The same bits as adding the rows one by one in their order (a float sum depends on its order).
TEST_CASE("Kernels.UnsortedSegmentSum.sums_in_the_order_of_the_rows") {
  runtime::Random rng(42);
  const int64_t rows = 5000, inner = 3, segments = 2;
  const Tensor data = random_tensor<float>(rng, {rows, inner}, -1e4, 1e4);
  const Tensor ids = make_tensor(DType::i32, {rows}, [&](int64_t) { return static_cast<double>(rng.below(segments)); });
  std::vector<float> want(segments * inner, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < inner; ++c) want[static_cast<size_t>(ids.data<int32_t>()[r] * inner + c)] += data.data<float>()[r * inner + c];
  }
  auto out = run_op("UnsortedSegmentSum", {data, ids}, {{"num_segments", segments}});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == want);
}

// Batch dims, each operand's (aligned at the right, 1 broadcast), and the product's sizes.
struct ProductCase {
  std::vector<int64_t> x_batch, y_batch;
  int64_t m, k, n;
};

std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The flat index, in an operand of batch dims `dims`, of the output batch index `at` broadcast to it.
int64_t broadcast_index(const std::vector<int64_t>& at, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) index[i] = dims[i] == 1 ? 0 : at[i + at.size() - dims.size()];
  return dims.empty() ? 0 : ravel(index, dims);
}

TEST_CASE("Kernels.BatchMatMulV2.matches_a_loop_per_matrix") {
  runtime::Random rng(43);
  for (const ProductCase& c : {ProductCase{{2}, {2}, 3, 4, 5}, ProductCase{{2, 3}, {3}, 2, 3, 2}, ProductCase{{1}, {4}, 3, 2, 3},
                               ProductCase{{2, 1}, {1, 3}, 2, 2, 2}, ProductCase{{}, {2, 2}, 3, 3, 1}, ProductCase{{3}, {3}, 0, 2, 2},
                               ProductCase{{2}, {2}, 2, 0, 3}, ProductCase{{0}, {1}, 2, 2, 2}, ProductCase{{4}, {4}, 33, 17, 9}}) {
    for (bool ax : {false, true}) {
      for (bool ay : {false, true}) {
        CAPTURE(c.m); CAPTURE(c.k); CAPTURE(c.n); CAPTURE(ax); CAPTURE(ay);
        std::vector<int64_t> xs = c.x_batch, ys = c.y_batch;
        xs.push_back(ax ? c.k : c.m);
        xs.push_back(ax ? c.m : c.k);
        ys.push_back(ay ? c.n : c.k);
        ys.push_back(ay ? c.k : c.n);
        const std::vector<int64_t> batch = broadcast(c.x_batch, c.y_batch);
        std::vector<int64_t> out_dims = batch;
        out_dims.push_back(c.m);
        out_dims.push_back(c.n);
        check_op_at_every_dtype("BatchMatMulV2", [&](DType dtype) {
          const Tensor x = random_of(rng, dtype, TensorShape(xs)), y = random_of(rng, dtype, TensorShape(ys));
          const Tensor want = make_tensor(dtype, TensorShape(out_dims), [&](int64_t i) {
            const int64_t matrix = i / (c.m * c.n), r = (i / c.n) % c.m, col = i % c.n;
            const std::vector<int64_t> at = batch.empty() ? std::vector<int64_t>{} : unravel(matrix, batch);
            const int64_t xm = broadcast_index(at, c.x_batch), ym = broadcast_index(at, c.y_batch);
            double sum = 0;
            for (int64_t k = 0; k < c.k; ++k) {
              sum += element(x, xm * c.m * c.k + (ax ? k * c.m + r : r * c.k + k)) *
                     element(y, ym * c.k * c.n + (ay ? col * c.k + k : k * c.n + col));
            }
            return sum;
          });
          return OpCase{{x, y}, {{"adj_x", ax}, {"adj_y", ay}}, {want}};
        });
      }
    }
  }
}

TEST_CASE("Kernels.BatchMatMulV2.refuses_what_does_not_multiply") {
  auto out = run_op("BatchMatMulV2", {Tensor::from<float>({2, 2, 3}, std::vector<float>(12, 1)),
                                      Tensor::from<float>({3, 3, 2}, std::vector<float>(18, 1))});
  REQUIRE_FALSE(out.ok());
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  ops::batch_matmul(b, ops::placeholder(b, "x", DType::f32, {2, 3}), ops::placeholder(b, "y", DType::f32, {2, 3}));
  CHECK(b.status().message().find("inner dimensions differ") != std::string::npos);
}

// Reference LayerNorm of a [rows, columns] view in double: y, mean and rstd.
struct LayerNormReference {
  std::vector<double> y, mean, rstd;
};

LayerNormReference layer_norm_loop(const Tensor& x, const Tensor& scale, const Tensor& offset, double epsilon) {
  const int64_t columns = x.dim(x.rank() - 1);
  const int64_t rows = columns == 0 ? 0 : x.num_elements() / columns;
  LayerNormReference r;
  for (int64_t row = 0; row < rows; ++row) {
    double sum = 0, squares = 0;
    for (int64_t c = 0; c < columns; ++c) sum += element(x, row * columns + c);
    const double mean = sum / static_cast<double>(columns);
    for (int64_t c = 0; c < columns; ++c) squares += std::pow(element(x, row * columns + c) - mean, 2);
    const double rstd = 1 / std::sqrt(squares / static_cast<double>(columns) + epsilon);
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
    for (int64_t c = 0; c < columns; ++c) {
      r.y.push_back((element(x, row * columns + c) - mean) * rstd * element(scale, c) + element(offset, c));
    }
  }
  return r;
}

TEST_CASE("Kernels.LayerNorm.normalises_each_row") {
  runtime::Random rng(44);
  for (const TensorShape& shape : {TensorShape{4, 5}, TensorShape{2, 3, 8}, TensorShape{1, 1}, TensorShape{0, 3}, TensorShape{3, 130},
                                   TensorShape{7}}) {
    CAPTURE(shape.to_string());
    const int64_t columns = shape.dim(shape.rank() - 1);
    const std::vector<int64_t> dims = shape.to_vector();
    const TensorShape rows(std::vector<int64_t>(dims.begin(), dims.end() - 1));
    for (double epsilon : {1e-5, 0.5}) {
      check_op_at_every_dtype("LayerNorm", [&](DType dtype) {
        // A large mean: the variance must come from deviations, not from E[x^2] - E[x]^2.
        const Tensor x = random_of(rng, dtype, shape, 1000, 1001);
        const Tensor scale = random_of(rng, dtype, {columns}, 0.5, 1.5), offset = random_of(rng, dtype, {columns});
        const LayerNormReference r = layer_norm_loop(x, scale, offset, epsilon);
        const DType statistics = dtype == DType::f64 ? DType::f64 : DType::f32;
        return OpCase{{x, scale, offset},
                      {{"epsilon", epsilon}},
                      {make_tensor(dtype, shape, [&](int64_t i) { return r.y[static_cast<size_t>(i)]; }),
                       make_tensor(statistics, rows, [&](int64_t i) { return r.mean[static_cast<size_t>(i)]; }),
                       make_tensor(statistics, rows, [&](int64_t i) { return r.rstd[static_cast<size_t>(i)]; })},
                      // In f64 the kernel adds a row in another order than this loop (four interleaved
                      // sums); around a mean of 1000 that moves y by some 1e-12.
                      dtype == DType::f64 ? std::optional<double>(1e-10) : std::nullopt};
      });
    }
  }
}

TEST_CASE("Kernels.LayerNormGrad.matches_the_formula") {
  runtime::Random rng(45);
  for (const TensorShape& shape : {TensorShape{4, 5}, TensorShape{2, 3, 70}, TensorShape{0, 3}}) {
    CAPTURE(shape.to_string());
    const int64_t columns = shape.dim(shape.rank() - 1);
    const int64_t rows = shape.num_elements() / columns;
    const std::vector<int64_t> dims = shape.to_vector();
    const TensorShape row_shape(std::vector<int64_t>(dims.begin(), dims.end() - 1));
    check_op_at_every_dtype("LayerNormGrad", [&](DType dtype) {
      const Tensor dy = random_of(rng, dtype, shape), x = random_of(rng, dtype, shape, -2, 2);
      const Tensor scale = random_of(rng, dtype, {columns}, 0.5, 1.5);
      const LayerNormReference r = layer_norm_loop(x, scale, scale, 1e-5);
      const DType statistics = dtype == DType::f64 ? DType::f64 : DType::f32;
      const Tensor mean = make_tensor(statistics, row_shape, [&](int64_t i) { return r.mean[static_cast<size_t>(i)]; });
      const Tensor rstd = make_tensor(statistics, row_shape, [&](int64_t i) { return r.rstd[static_cast<size_t>(i)]; });
      // From the statistics as given (rounded to their dtype), as the kernel reads them.
      std::vector<double> dx(static_cast<size_t>(shape.num_elements())), dscale(static_cast<size_t>(columns)), doffset(dscale.size());
      for (int64_t row = 0; row < rows; ++row) {
        const double mu = element(mean, row), inv = element(rstd, row);
        double mean_g = 0, mean_gx = 0;
        for (int64_t c = 0; c < columns; ++c) {
          const double xhat = (element(x, row * columns + c) - mu) * inv;
          const double g = element(dy, row * columns + c) * element(scale, c);
          mean_g += g / static_cast<double>(columns);
          mean_gx += g * xhat / static_cast<double>(columns);
          dscale[static_cast<size_t>(c)] += element(dy, row * columns + c) * xhat;
          doffset[static_cast<size_t>(c)] += element(dy, row * columns + c);
        }
        for (int64_t c = 0; c < columns; ++c) {
          const double xhat = (element(x, row * columns + c) - mu) * inv;
          dx[static_cast<size_t>(row * columns + c)] = inv * (element(dy, row * columns + c) * element(scale, c) - mean_g - xhat * mean_gx);
        }
      }
      return OpCase{{dy, x, scale, mean, rstd},
                    {},
                    {make_tensor(dtype, shape, [&](int64_t i) { return dx[static_cast<size_t>(i)]; }),
                     make_tensor(dtype, {columns}, [&](int64_t i) { return dscale[static_cast<size_t>(i)]; }),
                     make_tensor(dtype, {columns}, [&](int64_t i) { return doffset[static_cast<size_t>(i)]; })}};
    });
  }
}

// Random123's known answers for Philox4x32-10 (kat_vectors: zeros, all ones, the digits of pi).
TEST_CASE("Kernels.Dropout.philox_gives_the_published_answers") {
  using ops::philox::Block;
  const auto same = [](Block got, Block want) {
    for (int i = 0; i < 4; ++i) CHECK(got.v[i] == want.v[i]);
  };
  same(ops::philox::philox4x32_10({{0, 0, 0, 0}}, 0, 0), {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}});
  same(ops::philox::philox4x32_10({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff),
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}});
  same(ops::philox::philox4x32_10({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0),
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}});
}

TEST_CASE("Kernels.Dropout.drops_by_example_key") {
  runtime::Random rng(46);
  struct Case {
    TensorShape x;
    int64_t examples;
    double rate;
    bool training;
  };
  for (const Case& c : {Case{{4, 3}, 4, 0.5, true}, Case{{6, 2}, 2, 0.2, true}, Case{{2, 2, 3, 3}, 2, 0.7, true},
                        Case{{0, 3}, 0, 0.5, true}, Case{{4, 3}, 4, 0.5, false}, Case{{3, 5}, 3, 0.0, true}}) {
    CAPTURE(c.x.to_string());
    const Tensor keys = make_tensor(DType::i64, {c.examples}, [&](int64_t i) { return static_cast<double>(1000 * i + 17); });
    const int64_t per_example = c.examples == 0 ? 0 : c.x.num_elements() / c.examples;
    const int64_t seed = 12345;
    check_op_at_every_dtype("Dropout", [&](DType dtype) {
      const Tensor x = random_of(rng, dtype, c.x);
      const double scale = 1 / (1 - c.rate);
      const auto kept = [&](int64_t i) {
        const int64_t example = i / per_example;
        return !c.training || ops::philox::uniform(seed, static_cast<uint64_t>(element(keys, example)),
                                                   static_cast<uint64_t>(i % per_example)) >= c.rate;
      };
      const Tensor mask = make_tensor(dtype, c.x, [&](int64_t i) { return kept(i) ? (c.training ? scale : 1.0) : 0.0; });
      const Tensor y = make_tensor(dtype, c.x, [&](int64_t i) { return c.training ? element(x, i) * element(mask, i) : element(x, i); });
      return OpCase{{x, keys}, {{"rate", c.rate}, {"seed", seed}, {"training", c.training}}, {y, mask}};
    });
  }
}

// About `rate` of the elements dropped; the masks of a batch's examples are theirs whichever rows
// come with them (a replica's share), and differ between seeds and keys.
TEST_CASE("Kernels.Dropout.masks_belong_to_examples") {
  const int64_t examples = 8, per_example = 5000;
  const Tensor x = make_tensor(DType::f32, {examples, per_example}, [](int64_t) { return 1.0; });
  const Tensor keys = make_tensor(DType::i64, {examples}, [](int64_t i) { return static_cast<double>(i * 7 + 3); });
  const graph::AttrMap attrs = {{"rate", 0.3}, {"seed", int64_t{9}}};
  auto whole = run_op("Dropout", {x, keys}, attrs);
  REQUIRE(whole.ok());
  const std::vector<float> mask = (*whole)[1].to_vector<float>();
  double dropped = 0;
  for (float m : mask) {
    CHECK((m == 0.0f || m == static_cast<float>(1 / (1 - 0.3f))));
    dropped += m == 0.0f ? 1 : 0;
  }
  CHECK(dropped / static_cast<double>(mask.size()) == doctest::Approx(0.3).epsilon(0.03));
  const Tensor half_x = make_tensor(DType::f32, {3, per_example}, [](int64_t) { return 1.0; });
  const Tensor half_keys = make_tensor(DType::i64, {3}, [](int64_t i) { return static_cast<double>((i + 5) * 7 + 3); });
  auto part = run_op("Dropout", {half_x, half_keys}, attrs);
  REQUIRE(part.ok());
  const std::vector<float> part_mask = (*part)[1].to_vector<float>();
  CHECK(std::equal(part_mask.begin(), part_mask.end(), mask.begin() + 5 * per_example));
  graph::AttrMap other_seed = attrs;
  other_seed.set("seed", int64_t{10});
  auto other = run_op("Dropout", {x, keys}, other_seed);
  REQUIRE(other.ok());
  CHECK((*other)[1].to_vector<float>() != mask);
  auto bad = run_op("Dropout", {make_tensor(DType::f32, {5, 2}, [](int64_t) { return 1.0; }), keys}, attrs);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("does not hold rows of the 8 examples") != std::string::npos);
}

}  // namespace
}  // namespace mirra::test
