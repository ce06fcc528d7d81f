// ScaledDotProductAttention and its gradient op against plain loops of the composite (scores, mask,
// softmax, weighted sum) in double: causal and not, lengths across tile boundaries and not multiples of
// a tile, masks of both ranks, a given scale, a query with nothing to attend; against the graph
// composite (BatchMatMulV2, Softmax) within 1e-10 in f64; and its memory, linear in the length.
#include <cmath>
#include <limits>

#include "graph/gradients.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

struct Shape4 {
  int64_t batch, heads, t, s, d, e;
};

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

// The composite in double: for each (batch, head) the scores, their softmax P, o = P v, and for dO the
// gradients dV = P^T dO, dS = P (dO v^T - rowsum(dO o)), dQ = dS k scale, dK = dS^T q scale.
Reference composite(const Shape4& n, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, bool mask_full,
                    bool causal, double scale, const Tensor* d_out) {
  Reference r;
  r.o.assign(static_cast<size_t>(n.batch * n.heads * n.t * n.e), 0);
  r.lse.assign(static_cast<size_t>(n.batch * n.heads * n.t), 0);
  r.dq.assign(static_cast<size_t>(n.batch * n.heads * n.t * n.d), 0);
  r.dk.assign(static_cast<size_t>(n.batch * n.heads * n.s * n.d), 0);
  r.dv.assign(static_cast<size_t>(n.batch * n.heads * n.s * n.e), 0);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t bh = 0; bh < n.batch * n.heads; ++bh) {
    const int64_t h = bh % n.heads;
    std::vector<double> p(static_cast<size_t>(n.t * n.s));
    for (int64_t i = 0; i < n.t; ++i) {
      double top = -inf;
      for (int64_t j = 0; j < n.s; ++j) {
        double score = 0;
        for (int64_t x = 0; x < n.d; ++x) score += element(q, (bh * n.t + i) * n.d + x) * element(k, (bh * n.s + j) * n.d + x);
        score *= scale;
        if (mask != nullptr) score += element(*mask, mask_full ? (h * n.t + i) * n.s + j : i * n.s + j);
        if (causal && j > i) score = -inf;
        p[static_cast<size_t>(i * n.s + j)] = score;
        top = std::max(top, score);
      }
      double sum = 0;
      for (int64_t j = 0; j < n.s; ++j) {
        double& value = p[static_cast<size_t>(i * n.s + j)];
        value = top == -inf ? 0 : std::exp(value - top);
        sum += value;
      }
      for (int64_t j = 0; j < n.s; ++j) p[static_cast<size_t>(i * n.s + j)] = sum > 0 ? p[static_cast<size_t>(i * n.s + j)] / sum : 0;
      r.lse[static_cast<size_t>(bh * n.t + i)] = sum > 0 ? top + std::log(sum) : -inf;
      for (int64_t x = 0; x < n.e; ++x) {
        double value = 0;
        for (int64_t j = 0; j < n.s; ++j) value += p[static_cast<size_t>(i * n.s + j)] * element(v, (bh * n.s + j) * n.e + x);
        r.o[static_cast<size_t>((bh * n.t + i) * n.e + x)] = value;
      }
    }
    if (d_out == nullptr) continue;
    for (int64_t i = 0; i < n.t; ++i) {
      double delta = 0;
      for (int64_t x = 0; x < n.e; ++x) delta += element(*d_out, (bh * n.t + i) * n.e + x) * r.o[static_cast<size_t>((bh * n.t + i) * n.e + x)];
      for (int64_t j = 0; j < n.s; ++j) {
        const double pij = p[static_cast<size_t>(i * n.s + j)];
        double dp = 0;
        for (int64_t x = 0; x < n.e; ++x) {
          dp += element(*d_out, (bh * n.t + i) * n.e + x) * element(v, (bh * n.s + j) * n.e + x);
          r.dv[static_cast<size_t>((bh * n.s + j) * n.e + x)] += pij * element(*d_out, (bh * n.t + i) * n.e + x);
        }
        const double ds = pij * (dp - delta);
        for (int64_t x = 0; x < n.d; ++x) {
          r.dq[static_cast<size_t>((bh * n.t + i) * n.d + x)] += ds * element(k, (bh * n.s + j) * n.d + x) * scale;
          r.dk[static_cast<size_t>((bh * n.s + j) * n.d + x)] += ds * element(q, (bh * n.t + i) * n.d + x) * scale;
        }
      }
    }
  }
  return r;
}

struct Case {
  Shape4 n;
  bool causal;
  int mask_rank;  // 0: none; 2: [T, S]; 4: [1, heads, T, S]
  std::optional<double> scale;
};

const Case kCases[] = {
    {{2, 2, 5, 5, 4, 3}, false, 0, std::nullopt}, {{2, 2, 5, 5, 4, 3}, true, 0, std::nullopt},
    {{1, 2, 70, 70, 8, 8}, true, 0, std::nullopt}, {{1, 1, 130, 67, 4, 5}, false, 2, std::nullopt},
    {{2, 2, 9, 11, 3, 2}, false, 4, 0.7},          {{1, 1, 0, 4, 2, 2}, false, 0, std::nullopt},
};

Tensor mask_of(const Case& c, DType dtype, runtime::Random& rng) {
  const Shape4& n = c.n;
  return c.mask_rank == 2 ? random_of(rng, dtype, {n.t, n.s}, -2, 0) : random_of(rng, dtype, {1, n.heads, n.t, n.s}, -2, 0);
}

graph::AttrMap attrs_of(const Case& c) {
  graph::AttrMap attrs = {{"causal", c.causal}};
  if (c.scale) attrs.set("scale", *c.scale);
  return attrs;
}

double scale_of(const Case& c) { return c.scale ? *c.scale : 1 / std::sqrt(static_cast<double>(c.n.d)); }

TEST_CASE("Kernels.ScaledDotProductAttention.equals_the_composite") {
  runtime::Random rng(50);
  for (const Case& c : kCases) {
    const Shape4& n = c.n;
    CAPTURE(n.t); CAPTURE(n.s); CAPTURE(c.causal); CAPTURE(c.mask_rank);
    check_op_at_every_dtype("ScaledDotProductAttention", [&](DType dtype) {
      const Tensor q = random_of(rng, dtype, {n.batch, n.heads, n.t, n.d}, -2, 2);
      const Tensor k = random_of(rng, dtype, {n.batch, n.heads, n.s, n.d}, -2, 2);
      const Tensor v = random_of(rng, dtype, {n.batch, n.heads, n.s, n.e});
      std::vector<Tensor> inputs = {q, k, v};
      if (c.mask_rank > 0) inputs.push_back(mask_of(c, dtype, rng));
      const Reference r = composite(n, q, k, v, c.mask_rank > 0 ? &inputs[3] : nullptr, c.mask_rank == 4, c.causal, scale_of(c), nullptr);
      return OpCase{inputs, attrs_of(c),
                    {make_tensor(dtype, {n.batch, n.heads, n.t, n.e}, [&](int64_t i) { return r.o[static_cast<size_t>(i)]; }),
                     make_tensor(dtype, {n.batch, n.heads, n.t}, [&](int64_t i) { return r.lse[static_cast<size_t>(i)]; })},
                    dtype == DType::f64 ? std::optional<double>(1e-10) : std::nullopt};
    });
  }
}

TEST_CASE("Kernels.ScaledDotProductAttentionGrad.equals_the_composites_gradient") {
  runtime::Random rng(51);
  for (const Case& c : kCases) {
    const Shape4& n = c.n;
    CAPTURE(n.t); CAPTURE(c.causal); CAPTURE(c.mask_rank);
    check_op_at_every_dtype("ScaledDotProductAttentionGrad", [&](DType dtype) {
      const Tensor q = random_of(rng, dtype, {n.batch, n.heads, n.t, n.d}, -2, 2);
      const Tensor k = random_of(rng, dtype, {n.batch, n.heads, n.s, n.d}, -2, 2);
      const Tensor v = random_of(rng, dtype, {n.batch, n.heads, n.s, n.e});
      const Tensor d_out = random_of(rng, dtype, {n.batch, n.heads, n.t, n.e});
      const Tensor mask = c.mask_rank > 0 ? mask_of(c, dtype, rng) : Tensor();
      const Reference r = composite(n, q, k, v, c.mask_rank > 0 ? &mask : nullptr, c.mask_rank == 4, c.causal, scale_of(c), &d_out);
      // o and lse as the forward op gives them (rounded to the dtype), as the backward pass reads them.
      const Tensor o = make_tensor(dtype, {n.batch, n.heads, n.t, n.e}, [&](int64_t i) { return r.o[static_cast<size_t>(i)]; });
      const Tensor lse = make_tensor(dtype, {n.batch, n.heads, n.t}, [&](int64_t i) { return r.lse[static_cast<size_t>(i)]; });
      std::vector<Tensor> inputs = {d_out, q, k, v, o, lse};
      if (c.mask_rank > 0) inputs.push_back(mask);
      return OpCase{inputs, attrs_of(c),
                    {make_tensor(dtype, q.shape(), [&](int64_t i) { return r.dq[static_cast<size_t>(i)]; }),
                     make_tensor(dtype, k.shape(), [&](int64_t i) { return r.dk[static_cast<size_t>(i)]; }),
                     make_tensor(dtype, v.shape(), [&](int64_t i) { return r.dv[static_cast<size_t>(i)]; })},
                    dtype == DType::f64 ? std::optional<double>(1e-10) : std::optional<double>(1e-4)};
    });
  }
}

// A query whose every key is masked out attends nothing: zeros, a log-sum-exp of -inf, no gradient.
TEST_CASE("Kernels.ScaledDotProductAttention.a_fully_masked_query_gives_zeros") {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor q = make_tensor(DType::f64, {1, 1, 2, 2}, [](int64_t i) { return 0.3 * static_cast<double>(i + 1); });
  const Tensor k = make_tensor(DType::f64, {1, 1, 3, 2}, [](int64_t i) { return 0.1 * static_cast<double>(i) - 0.2; });
  const Tensor v = make_tensor(DType::f64, {1, 1, 3, 2}, [](int64_t i) { return static_cast<double>(i); });
  const Tensor mask = Tensor::from<double>({2, 3}, {0, -1, 0, -inf, -inf, -inf});
  auto out = run_op("ScaledDotProductAttention", {q, k, v, mask});
  REQUIRE(out.ok());
  const std::vector<double> o = (*out)[0].to_vector<double>(), lse = (*out)[1].to_vector<double>();
  CHECK(o[2] == 0);
  CHECK(o[3] == 0);
  CHECK(lse[1] == -inf);
  CHECK(std::isfinite(lse[0]));
  auto grads = run_op("ScaledDotProductAttentionGrad",
                      {make_tensor(DType::f64, {1, 1, 2, 2}, [](int64_t) { return 1.0; }), q, k, v, (*out)[0], (*out)[1], mask});
  REQUIRE(grads.ok());
  for (const Tensor& g : *grads) {
    for (double value : g.to_vector<double>()) CHECK(std::isfinite(value));
  }
  CHECK((*grads)[0].to_vector<double>()[2] == 0);
}

// The graph's composite, as the GPT example builds it without the op, computes the same in f64.
TEST_CASE("Kernels.ScaledDotProductAttention.equals_the_graph_composite_in_f64") {
  runtime::Random rng(52);
  const int64_t batch = 2, heads = 3, t = 75, d = 8;
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto q = ops::placeholder(b, "q", DType::f64, {batch, heads, t, d});
  const auto k = ops::placeholder(b, "k", DType::f64, {batch, heads, t, d});
  const auto v = ops::placeholder(b, "v", DType::f64, {batch, heads, t, d});
  const auto fused = ops::scaled_dot_product_attention(b, q, k, v, {.causal = true});
  std::vector<double> causal(static_cast<size_t>(t * t), 0.0);
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = i + 1; j < t; ++j) causal[static_cast<size_t>(i * t + j)] = -std::numeric_limits<double>::infinity();
  }
  const auto scores = ops::add(b, ops::mul(b, ops::batch_matmul(b, q, k, false, true), ops::scalar_of(b, 1 / std::sqrt(8.0), q)),
                               ops::constant<double>(b, {t, t}, std::span<const double>(causal)));
  const auto composite = ops::batch_matmul(b, ops::softmax(b, scores), v);
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels());
  auto out = session.run({{"q", random_tensor<double>(rng, {batch, heads, t, d}, -3, 3)},
                          {"k", random_tensor<double>(rng, {batch, heads, t, d}, -3, 3)},
                          {"v", random_tensor<double>(rng, {batch, heads, t, d})}},
                         {fused, composite});
  REQUIRE(out.ok());
  check_elements((*out)[0], (*out)[1], 1e-10);
}

// The most device memory a forward and backward pass of causal attention holds at once, at length t:
// the fused op's, or the composite's.
size_t attention_peak_bytes(int64_t t, bool fused) {
  const int64_t heads = 2, d = 16;
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto q = ops::placeholder(b, "q", DType::f32, {1, heads, t, d});
  const auto k = ops::placeholder(b, "k", DType::f32, {1, heads, t, d});
  const auto v = ops::placeholder(b, "v", DType::f32, {1, heads, t, d});
  graph::ValueRef o;
  if (fused) {
    o = ops::scaled_dot_product_attention(b, q, k, v, {.causal = true});
  } else {
    std::vector<float> causal(static_cast<size_t>(t * t), 0.0f);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = i + 1; j < t; ++j) causal[static_cast<size_t>(i * t + j)] = -std::numeric_limits<float>::infinity();
    }
    const auto scores = ops::add(b, ops::mul(b, ops::batch_matmul(b, q, k, false, true), ops::scalar(b, 0.25f)),
                                 ops::constant<float>(b, {t, t}, std::span<const float>(causal)));
    o = ops::batch_matmul(b, ops::softmax(b, scores), v);
  }
  auto grads = graph::gradients(b, ops::reduce_sum(b, ops::square(b, o)), std::vector<graph::ValueRef>{q, k, v});
  REQUIRE(grads.ok());
  runtime::Session session(g, ops::kernels());
  runtime::Random rng(53);
  auto out = session.run({{"q", random_tensor<float>(rng, {1, heads, t, d})}, {"k", random_tensor<float>(rng, {1, heads, t, d})},
                          {"v", random_tensor<float>(rng, {1, heads, t, d})}},
                         std::span<const graph::ValueRef>(*grads));
  REQUIRE(out.ok());
  size_t peak = 0;
  for (const auto& device : session.devices().devices()) peak += device->allocator()->stats().peak_bytes_in_use;
  return peak;
}

TEST_CASE("Kernels.ScaledDotProductAttention.memory_grows_linearly_in_the_length") {
  const double fused = static_cast<double>(attention_peak_bytes(512, true)) / static_cast<double>(attention_peak_bytes(128, true));
  const double composite =
      static_cast<double>(attention_peak_bytes(512, false)) / static_cast<double>(attention_peak_bytes(128, false));
  CAPTURE(fused);
  CAPTURE(composite);
  CHECK(fused <= 4.5);      // 4 times the length: about 4 times the memory
  CHECK(composite >= 12);  // the [T, T] scores: about 16 times
}

}  // namespace
}  // namespace mirra::test
