// ScaledDotProductAttention and its gradient: schemas, builder, gradient rule and CPU kernels. The
// forward pass runs over (batch, head, query tile) in parallel; each tile visits the key tiles in
// order, rescaling its running row maxima, sums and outputs (the online softmax). The backward pass
// takes two sweeps, each writing only its own rows, so no sum depends on scheduling: per key tile,
// dK and dV over every query tile; per query tile, dQ over every key tile; both recompute the
// probabilities from the saved log-sum-exp. Tile products run through cpu::gemm.
#include "ops/attention_ops.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// Queries and keys per tile.
inline constexpr int64_t kTile = 64;

Status check_attention_inputs(const InferContext& ctx, size_t first) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, first, {DType::f32, DType::f64}));
  const DType dtype = ctx.input(first).dtype;
  for (size_t i = first; i < first + 3; ++i) {
    if (ctx.input(i).dtype != dtype) return ctx.error("q, k and v must share a dtype");
    if (ctx.input(i).shape.rank() != 4) return ctx.error("q, k and v must be [batch, heads, length, size]");
  }
  const Shape& q = ctx.input(first).shape;
  const Shape& k = ctx.input(first + 1).shape;
  const Shape& v = ctx.input(first + 2).shape;
  const auto differ = [](int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; };
  for (int d = 0; d < 2; ++d) {
    if (differ(q.dim(d), k.dim(d)) || differ(q.dim(d), v.dim(d))) return ctx.error("q, k and v differ in batch or heads");
  }
  if (differ(q.dim(3), k.dim(3))) return ctx.error("q and k differ in their size");
  if (differ(k.dim(2), v.dim(2))) return ctx.error("k and v differ in length");
  return Status();
}

Shape attention_output(const InferContext& ctx, size_t first) {
  const Shape& q = ctx.input(first).shape;
  return Shape{q.dim(0), q.dim(1), q.dim(2), ctx.input(first + 2).shape.dim(3)};
}

Expected<std::vector<TensorType>> infer_attention(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_attention_inputs(ctx, 0));
  if (ctx.num_inputs() == 4 && ctx.input(3).dtype != ctx.input(0).dtype) return ctx.error("the mask must have q's dtype");
  if (ctx.num_inputs() == 4 && ctx.input(3).shape.rank() != 2 && ctx.input(3).shape.rank() != 4) {
    return ctx.error("the mask must be [T, S] or [batch or 1, heads or 1, T, S]");
  }
  const Shape& q = ctx.input(0).shape;
  return std::vector<TensorType>{{ctx.input(0).dtype, attention_output(ctx, 0)},
                                 {ctx.input(0).dtype, Shape{q.dim(0), q.dim(1), q.dim(2)}}};
}

// Inputs dO, q, k, v, o, lse[, mask].
Expected<std::vector<TensorType>> infer_attention_grad(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_attention_inputs(ctx, 1));
  for (size_t i : {size_t{0}, size_t{4}}) {
    if (ctx.input(i).dtype != ctx.input(1).dtype || ctx.input(i).shape.rank() != 4) return ctx.error("dO and o must be like the output");
  }
  return std::vector<TensorType>{ctx.input(1), ctx.input(2), ctx.input(3)};
}

// One head's operands and its slice of the mask.
template <class T>
struct Head {
  const T* q;
  const T* k;
  const T* v;
  const T* mask;  // element (i, j) at mask[i * mask_row + j * mask_column]; null: none
  int64_t mask_row, mask_column;
};

template <class T>
Head<T> head_of(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, int64_t bh) {
  const int64_t b = bh / g.heads, h = bh % g.heads;
  Head<T> head{q.data<T>() + bh * g.t * g.d, k.data<T>() + bh * g.s * g.d, v.data<T>() + bh * g.s * g.e, nullptr, 0, 0};
  if (mask != nullptr) {
    head.mask = mask->data<T>() + b * g.mask_strides[0] + h * g.mask_strides[1];
    head.mask_row = g.mask_strides[2];
    head.mask_column = g.mask_strides[3];
  }
  return head;
}

// How many of the keys [j0, j0 + columns) query i may attend to: all, or under causality those up to i.
inline int64_t attended(const AttentionGeometry& g, int64_t i, int64_t j0, int64_t columns) {
  return g.causal ? std::clamp<int64_t>(i - j0 + 1, 0, columns) : columns;
}

// The scores of queries [i0, i0 + rows) against keys [j0, j0 + columns) into s (rows x columns):
// scaled, masked, -inf where causality forbids.
template <class T>
void tile_scores(const AttentionGeometry& g, const Head<T>& head, int64_t i0, int64_t rows, int64_t j0, int64_t columns, T* s,
                 const std::shared_ptr<runtime::Allocator>& scratch) {
  cpu::gemm<T>(false, true, rows, columns, g.d, head.q + i0 * g.d, head.k + j0 * g.d, s, scratch);
  const T scale = static_cast<T>(g.scale);
  for (int64_t r = 0; r < rows; ++r) {
    T* row = s + r * columns;
    const int64_t seen = attended(g, i0 + r, j0, columns);
    for (int64_t c = 0; c < seen; ++c) row[c] *= scale;
    if (head.mask != nullptr) {
      const T* mask_row = head.mask + (i0 + r) * head.mask_row + j0 * head.mask_column;
      for (int64_t c = 0; c < seen; ++c) row[c] += mask_row[c * head.mask_column];
    }
    std::fill(row + seen, row + columns, -std::numeric_limits<T>::infinity());
  }
}

// The key tiles a query tile [i0, i1) visits: all, or under causality those starting at or before i1 - 1.
int64_t key_tiles_for(const AttentionGeometry& g, int64_t i1) {
  const int64_t last = g.causal ? std::min(g.s, i1) : g.s;
  return (last + kTile - 1) / kTile;
}

template <class T>
void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, Tensor& o,
                       Tensor& lse, const std::shared_ptr<runtime::Allocator>& scratch) {
  const int64_t query_tiles = (g.t + kTile - 1) / kTile;
  cpu::parallel_for(g.batch * g.heads * query_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> s(kTile * kTile), pv(static_cast<size_t>(kTile * g.e)), acc(pv.size()), m(kTile), l(kTile);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / query_tiles, i0 = (task % query_tiles) * kTile, rows = std::min(kTile, g.t - i0);
      const Head<T> head = head_of<T>(g, q, k, v, mask, bh);
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t tile = 0; tile < key_tiles_for(g, i0 + rows); ++tile) {
        const int64_t j0 = tile * kTile, columns = std::min(kTile, g.s - j0);
        tile_scores(g, head, i0, rows, j0, columns, s.data(), scratch);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = s.data() + r * columns;
          const int64_t seen = attended(g, i0 + r, j0, columns);  // the others are -inf: probability 0
          T top = m[static_cast<size_t>(r)];
          for (int64_t c = 0; c < seen; ++c) top = std::max(top, row[c]);
          // Nothing attendable yet: the row's probabilities, sum and output stay zero.
          const bool none = top == -std::numeric_limits<T>::infinity();
          const T rescale = none ? T(1) : std::exp(m[static_cast<size_t>(r)] - top);
          T sum = 0;
          if (none) {
            std::fill(row, row + columns, T(0));
          } else {
            for (int64_t c = 0; c < seen; ++c) {
              row[c] = std::exp(row[c] - top);
              sum += row[c];
            }
            std::fill(row + seen, row + columns, T(0));
          }
          l[static_cast<size_t>(r)] = l[static_cast<size_t>(r)] * rescale + sum;
          m[static_cast<size_t>(r)] = top;
          for (int64_t x = 0; x < g.e; ++x) acc[static_cast<size_t>(r * g.e + x)] *= rescale;
        }
        cpu::gemm<T>(false, false, rows, g.e, columns, s.data(), head.v + j0 * g.e, pv.data(), scratch);
        for (int64_t x = 0; x < rows * g.e; ++x) acc[static_cast<size_t>(x)] += pv[static_cast<size_t>(x)];
      }
      T* out = o.mutable_data<T>() + (bh * g.t + i0) * g.e;
      T* row_lse = lse.mutable_data<T>() + bh * g.t + i0;
      for (int64_t r = 0; r < rows; ++r) {
        const T sum = l[static_cast<size_t>(r)];
        for (int64_t x = 0; x < g.e; ++x) out[r * g.e + x] = sum > 0 ? acc[static_cast<size_t>(r * g.e + x)] / sum : T(0);
        row_lse[r] = sum > 0 ? m[static_cast<size_t>(r)] + std::log(sum) : -std::numeric_limits<T>::infinity();
      }
    }
  });
}

Status attention_kernel(KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(ctx, 0, 3));
  const Tensor* mask = ctx.num_inputs() == 4 ? &ctx.input(3) : nullptr;
  Tensor& o = ctx.allocate_output(0, ctx.input(0).dtype(), TensorShape{g.batch, g.heads, g.t, g.e});
  Tensor& lse = ctx.allocate_output(1, ctx.input(0).dtype(), TensorShape{g.batch, g.heads, g.t});
  return cpu::visit_dtype<float, double>(o.dtype(), [&]<class T>(cpu::Type<T>) {
    attention_forward<T>(g, ctx.input(0), ctx.input(1), ctx.input(2), mask, o, lse, ctx.device().allocator());
    return Status();
  });
}

// The probabilities P and dS = P (dP - D) of queries [i0, i0 + rows) and keys [j0, j0 + columns), with
// dP = dO V^T; ds holds dS on return, s holds P.
template <class T>
void tile_gradient(const AttentionGeometry& g, const Head<T>& head, const T* d_out, const T* lse, const T* delta, int64_t i0,
                   int64_t rows, int64_t j0, int64_t columns, T* s, T* ds, const std::shared_ptr<runtime::Allocator>& scratch) {
  tile_scores(g, head, i0, rows, j0, columns, s, scratch);
  for (int64_t r = 0; r < rows; ++r) {
    const T row_lse = lse[i0 + r];
    T* row = s + r * columns;
    const int64_t seen = row_lse == -std::numeric_limits<T>::infinity() ? 0 : attended(g, i0 + r, j0, columns);
    for (int64_t c = 0; c < seen; ++c) row[c] = std::exp(row[c] - row_lse);
    std::fill(row + seen, row + columns, T(0));
  }
  cpu::gemm<T>(false, true, rows, columns, g.e, d_out + i0 * g.e, head.v + j0 * g.e, ds, scratch);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) ds[r * columns + c] = s[r * columns + c] * (ds[r * columns + c] - delta[i0 + r]);
  }
}

template <class T>
void attention_backward(const AttentionGeometry& g, const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& o, const Tensor& lse, const Tensor* mask, Tensor& dq, Tensor& dk, Tensor& dv,
                        const std::shared_ptr<runtime::Allocator>& scratch) {
  // D_i = sum over e of dO_ie O_ie, per query.
  std::vector<T> delta(static_cast<size_t>(g.batch * g.heads * g.t));
  cpu::parallel_for(static_cast<int64_t>(delta.size()), std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(g.e, 1)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t i = begin; i < end; ++i) {
                        T sum = 0;
                        for (int64_t x = 0; x < g.e; ++x) sum += d_out.data<T>()[i * g.e + x] * o.data<T>()[i * g.e + x];
                        delta[static_cast<size_t>(i)] = sum;
                      }
                    });
  const T scale = static_cast<T>(g.scale);
  const int64_t query_tiles = (g.t + kTile - 1) / kTile, key_tiles = (g.s + kTile - 1) / kTile;
  // dK and dV, per key tile, over the query tiles that see it. With one key tile, each query tile's
  // dQ comes from that tile alone, so this pass writes it too (race-free) and the second is skipped.
  const bool one_key_tile = key_tiles == 1;
  cpu::parallel_for(g.batch * g.heads * key_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> s(kTile * kTile), ds(s.size()), part(static_cast<size_t>(kTile * std::max(g.d, g.e)));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / key_tiles, j0 = (task % key_tiles) * kTile, columns = std::min(kTile, g.s - j0);
      const Head<T> head = head_of<T>(g, q, k, v, mask, bh);
      const T* head_d_out = d_out.data<T>() + bh * g.t * g.e;
      T* head_dk = dk.mutable_data<T>() + (bh * g.s + j0) * g.d;
      T* head_dv = dv.mutable_data<T>() + (bh * g.s + j0) * g.e;
      std::fill_n(head_dk, columns * g.d, T(0));
      std::fill_n(head_dv, columns * g.e, T(0));
      for (int64_t tile = g.causal ? j0 / kTile : 0; tile < query_tiles; ++tile) {
        const int64_t i0 = tile * kTile, rows = std::min(kTile, g.t - i0);
        tile_gradient(g, head, head_d_out, lse.data<T>() + bh * g.t, delta.data() + bh * g.t, i0, rows, j0, columns, s.data(),
                      ds.data(), scratch);
        cpu::gemm<T>(true, false, columns, g.e, rows, s.data(), head_d_out + i0 * g.e, part.data(), scratch);
        for (int64_t x = 0; x < columns * g.e; ++x) head_dv[x] += part[static_cast<size_t>(x)];
        cpu::gemm<T>(true, false, columns, g.d, rows, ds.data(), head.q + i0 * g.d, part.data(), scratch);
        for (int64_t x = 0; x < columns * g.d; ++x) head_dk[x] += part[static_cast<size_t>(x)] * scale;
        if (one_key_tile) {
          T* head_dq = dq.mutable_data<T>() + (bh * g.t + i0) * g.d;
          cpu::gemm<T>(false, false, rows, g.d, columns, ds.data(), head.k + j0 * g.d, part.data(), scratch);
          for (int64_t x = 0; x < rows * g.d; ++x) head_dq[x] = part[static_cast<size_t>(x)] * scale;
        }
      }
    }
  });
  if (one_key_tile) return;
  // dQ, per query tile, over the key tiles it sees.
  cpu::parallel_for(g.batch * g.heads * query_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> s(kTile * kTile), ds(s.size()), part(static_cast<size_t>(kTile * g.d));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / query_tiles, i0 = (task % query_tiles) * kTile, rows = std::min(kTile, g.t - i0);
      const Head<T> head = head_of<T>(g, q, k, v, mask, bh);
      T* head_dq = dq.mutable_data<T>() + (bh * g.t + i0) * g.d;
      std::fill_n(head_dq, rows * g.d, T(0));
      for (int64_t tile = 0; tile < key_tiles_for(g, i0 + rows); ++tile) {
        const int64_t j0 = tile * kTile, columns = std::min(kTile, g.s - j0);
        tile_gradient(g, head, d_out.data<T>() + bh * g.t * g.e, lse.data<T>() + bh * g.t, delta.data() + bh * g.t, i0, rows, j0,
                      columns, s.data(), ds.data(), scratch);
        cpu::gemm<T>(false, false, rows, g.d, columns, ds.data(), head.k + j0 * g.d, part.data(), scratch);
        for (int64_t x = 0; x < rows * g.d; ++x) head_dq[x] += part[static_cast<size_t>(x)] * scale;
      }
    }
  });
}

Status attention_grad_kernel(KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(ctx, 1, 6));
  const Tensor& d_out = ctx.input(0);
  const Tensor& o = ctx.input(4);
  const Tensor& lse = ctx.input(5);
  if (!(d_out.shape() == o.shape()) || !(d_out.shape() == TensorShape{g.batch, g.heads, g.t, g.e}) ||
      lse.num_elements() != g.batch * g.heads * g.t) {
    return graph::invalid_argument("dO " + d_out.type_string() + ", o " + o.type_string() + " and lse " + lse.type_string() +
                                   " do not match the attention's output");
  }
  const Tensor* mask = ctx.num_inputs() == 7 ? &ctx.input(6) : nullptr;
  Tensor& dq = ctx.allocate_output(0, d_out.dtype(), ctx.input(1).shape());
  Tensor& dk = ctx.allocate_output(1, d_out.dtype(), ctx.input(2).shape());
  Tensor& dv = ctx.allocate_output(2, d_out.dtype(), ctx.input(3).shape());
  return cpu::visit_dtype<float, double>(d_out.dtype(), [&]<class T>(cpu::Type<T>) {
    attention_backward<T>(g, d_out, ctx.input(1), ctx.input(2), ctx.input(3), o, lse, mask, dq, dk, dv, ctx.device().allocator());
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// q's, k's and v's gradients (the mask's none: it is a constant of the model).
Grads attention_grad(GradientContext& g) {
  Builder& b = g.builder;
  if (!g.grad(0).valid()) return Grads(g.node.inputs.size());
  std::vector<ValueRef> inputs = {g.grad(0), g.input(0), g.input(1), g.input(2), g.output(0), g.output(1)};
  if (g.node.inputs.size() == 4) inputs.push_back(g.input(3));
  const graph::NodeId id = b.add({.op = "ScaledDotProductAttentionGrad", .inputs = inputs, .attrs = g.node.attrs});
  Grads grads(g.node.inputs.size());
  for (uint16_t i = 0; i < 3; ++i) {
    if (g.needs(i)) grads[i] = {id, i};
  }
  return grads;
}

std::vector<graph::AttrSpec> attention_attrs() {
  return {{"causal", AttrType::boolean, false}, {"scale", AttrType::real, std::nullopt, /*optional=*/true}};
}

// The sizes a cost counts from q [b, h, T, d], k [b, h, S, d] and v [b, h, S, e], unknown ones as none.
struct AttentionSizes {
  double heads = 0, t = 0, s = 0, d = 0, e = 0;
};

AttentionSizes attention_sizes(const graph::Shape& q, const graph::Shape& k, const graph::Shape& v) {
  const auto known = [](int64_t dim) { return static_cast<double>(std::max<int64_t>(dim, 0)); };
  return {.heads = known(q.dim(0)) * known(q.dim(1)), .t = known(q.dim(2)), .s = known(k.dim(2)), .d = known(q.dim(3)),
          .e = known(v.dim(3))};
}

}  // namespace

void register_attention_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "ScaledDotProductAttention",
      .inputs = {"q", "k", "v", "mask"},
      .optional_inputs = 1,
      .attrs = attention_attrs(),
      .infer = infer_attention,
      // Per batch and head: q k^T (T x S x d) and P v (T x S x e), the whole score matrix even where
      // causality masks it.
      .cost = [](const graph::CostContext& c) {
        const AttentionSizes n = attention_sizes(c.inputs[0].shape, c.inputs[1].shape, c.inputs[2].shape);
        return graph::product_cost(c, n.heads * n.t * n.s * (n.d + n.e));
      },
      .summary = "softmax(q k^T * scale + mask) v per batch and head (scale: 1 / sqrt(size) unless given; causal: each "
                 "query attends its own and earlier keys), in key tiles with an online softmax; output 1 is each query's "
                 "log-sum-exp of its scores. A query with no key to attend gives zeros.",
      .gradient = attention_grad});
  kernels.add("ScaledDotProductAttention", graph::DeviceKind::cpu, {.fn = attention_kernel, .expensive = true});

  schemas.add(graph::OpSchema{
      .name = "ScaledDotProductAttentionGrad",
      .inputs = {"d_output", "q", "k", "v", "output", "lse", "mask"},
      .optional_inputs = 1,
      .attrs = attention_attrs(),
      .infer = infer_attention_grad,
      // The scores recomputed (T x S x d), then dv (S x T x e), dP (T x S x e), dq (T x S x d) and dk
      // (S x T x d): FlashAttention-2's backward pass.
      .cost = [](const graph::CostContext& c) {
        const AttentionSizes n = attention_sizes(c.inputs[1].shape, c.inputs[2].shape, c.inputs[3].shape);
        return graph::product_cost(c, n.heads * n.t * n.s * (3 * n.d + 2 * n.e));
      },
      .summary = "ScaledDotProductAttention's gradient: dq, dk, dv, the probabilities recomputed tile by tile from lse.",
      .no_gradient = "second derivatives of attention are not supported"});
  kernels.add("ScaledDotProductAttentionGrad", graph::DeviceKind::cpu, {.fn = attention_grad_kernel, .expensive = true});
}

ValueRef scaled_dot_product_attention(Builder& b, ValueRef q, ValueRef k, ValueRef v, const AttentionOptions& options) {
  graph::AttrMap attrs = {{"causal", options.causal}};
  if (options.scale) attrs.set("scale", *options.scale);
  std::vector<ValueRef> inputs = {q, k, v};
  if (options.mask.valid()) inputs.push_back(options.mask);
  return b.add_value({.op = "ScaledDotProductAttention", .inputs = inputs, .attrs = attrs});
}

}  // namespace mirra::ops
