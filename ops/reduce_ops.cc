// ReduceSum, ReduceMean, ReduceMax and ArgMax: schemas, builders and CPU kernels.
#include <algorithm>
#include <limits>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/reduce.h"
#include "ops/array_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/reduce_geometry.h"
#include "ops/reduce_ops.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

template <cpu::Reduction kReduction>
Status reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto axes = *reduced_axes(ctx.node(), x.rank());
  Tensor& y = ctx.allocate_output(0, x.dtype(), reduced_shape(x.shape(), axes, ctx.attr<bool>("keep_dims")));
  return cpu::visit_dtype<float, double, int32_t, int64_t>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    cpu::reduce_into<T, kReduction>(x, axes, y.mutable_data<T>());
    return Status();
  });
}

Expected<std::vector<TensorType>> infer_reduce(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
  const Shape& in = ctx.input(0).shape;
  const auto axes = reduced_axes(ctx.node(), in.rank());
  if (!axes) return ctx.error("an axis is out of range or given twice");
  const bool keep = ctx.attr<bool>("keep_dims");
  Shape out;
  for (int d = 0; d < in.rank(); ++d) {
    const bool is_reduced = std::find(axes->begin(), axes->end(), d) != axes->end();
    if (!is_reduced) {
      out.dims.push_back(in.dim(d));
    } else if (keep) {
      out.dims.push_back(1);
    }
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

Status argmax_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const ArgMaxGeometry g, argmax_geometry(ctx, x));
  const int64_t n = g.n, outer = g.outer, inner = g.inner;
  Tensor& y = ctx.allocate_output(0, DType::i64, g.output);
  int64_t* out = y.mutable_data<int64_t>();
  return cpu::visit_dtype<float, double, int32_t, int64_t>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    cpu::parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* base = in + (o / inner) * n * inner + o % inner;
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i) {
          if (base[i * inner] > base[best * inner]) best = i;
        }
        out[o] = best;
      }
    });
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// What the gradient rules share: the reduced axes, and dy (or y) reshaped to keep the reduced dims.
struct ReducedGrad {
  std::vector<int64_t> axes;
  ValueRef kept_dy, kept_y;
};

std::optional<ReducedGrad> reduced_grad(GradientContext& g) {
  auto& b = g.builder;
  const Shape& in = g.input_types[0].shape;
  const auto axes = *reduced_axes(g.node, in.rank());
  ReducedGrad r;
  r.axes.assign(axes.begin(), axes.end());
  if (g.attr<bool>("keep_dims")) {
    r.kept_dy = g.grad(0);
    r.kept_y = g.output(0);
    return r;
  }
  std::vector<int64_t> kept;
  int unknown = 0;
  for (int d = 0; d < in.rank(); ++d) {
    const bool is_reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    kept.push_back(is_reduced ? 1 : in.dim(d));
    unknown += !is_reduced && in.dim(d) < 0;
  }
  if (unknown > 1) {
    b.fail(graph::unimplemented("node '" + g.node.name + "': gradient needs at most one unknown kept dim"));
    return std::nullopt;
  }
  r.kept_dy = reshape(b, g.grad(0), kept);
  r.kept_y = reshape(b, g.output(0), kept);
  return r;
}

// dy broadcast over x's shape.
ValueRef broadcast_like(Builder& b, ValueRef kept, ValueRef x) { return add(b, zeros_like(b, x), kept); }

Grads reduce_sum_grad(GradientContext& g) {
  const auto r = reduced_grad(g);
  if (!r) return {};
  return {broadcast_like(g.builder, r->kept_dy, g.input(0))};
}

Grads reduce_mean_grad(GradientContext& g) {
  auto& b = g.builder;
  const auto r = reduced_grad(g);
  if (!r) return {};
  const ValueRef x = g.input(0);
  // The count of reduced elements: a constant when the reduced dims are known, else counted at run time.
  int64_t count = 1;
  for (int64_t axis : r->axes) count = count < 0 || g.input_types[0].shape.dim(static_cast<int>(axis)) < 0 ? -1 : count * g.input_types[0].shape.dim(static_cast<int>(axis));
  ValueRef divisor;
  if (count >= 0) {
    divisor = scalar_of(b, static_cast<double>(count), x);
  } else {  // nodes built one statement at a time: argument evaluation order is unspecified
    const ValueRef zeros = zeros_like(b, x);
    divisor = reduce_sum(b, add(b, zeros, scalar_of(b, 1.0, x)), r->axes, true);
  }
  return {div(b, broadcast_like(b, r->kept_dy, x), divisor)};
}

Grads reduce_max_grad(GradientContext& g) {  // dy shared among the elements equal to the max
  auto& b = g.builder;
  const auto r = reduced_grad(g);
  if (!r) return {};
  const ValueRef x = g.input(0);
  const ValueRef is_max = cast(b, equal(b, x, broadcast_like(b, r->kept_y, x)), b.type(x).dtype);
  const ValueRef ties = reduce_sum(b, is_max, r->axes, true);
  return {div(b, mul(b, is_max, broadcast_like(b, r->kept_dy, x)), ties)};
}

void register_reduce(const char* name, runtime::KernelFn kernel, graph::GradientFn gradient, graph::OpRegistry& schemas,
                     runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"x"},
                              .attrs = {{"axes", AttrType::int_list, std::nullopt, /*optional=*/true},
                                        {"keep_dims", AttrType::boolean, false}},
                              .traits = graph::kReduction,
                              .infer = infer_reduce,
                              .summary = "Reduces over axes (absent: all; empty: none, as in TensorFlow).",
                              .gradient = std::move(gradient)});
  kernels.add(name, graph::DeviceKind::cpu, {kernel});
}

ValueRef reduce(Builder& b, const char* op, ValueRef x, const Axes& axes, bool keep_dims) {
  graph::AttrMap attrs = {{"keep_dims", keep_dims}};
  if (axes.list()) attrs.set("axes", *axes.list());
  return b.add_value({.op = op, .inputs = {x}, .attrs = std::move(attrs)});
}

}  // namespace

void register_reduce_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_reduce("ReduceSum", reduce_kernel<cpu::Reduction::sum>, reduce_sum_grad, schemas, kernels);
  register_reduce("ReduceMean", reduce_kernel<cpu::Reduction::mean>, reduce_mean_grad, schemas, kernels);
  register_reduce("ReduceMax", reduce_kernel<cpu::Reduction::max>, reduce_max_grad, schemas, kernels);
  schemas.add(graph::OpSchema{
      .name = "ArgMax",
      .inputs = {"x"},
      .attrs = {{"axis", AttrType::integer, {}}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
        const Shape& in = ctx.input(0).shape;
        const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), in.rank());
        if (!axis) return ctx.error("axis is out of range");
        Shape out;
        for (int d = 0; d < in.rank(); ++d) {
          if (d != *axis) out.dims.push_back(in.dim(d));
        }
        return std::vector<TensorType>{{DType::i64, out}};
      },
      .summary = "Index of the largest element along axis (the first, on ties).",
      .no_gradient = "it outputs integer indices"});
  kernels.add("ArgMax", graph::DeviceKind::cpu, {argmax_kernel});
}

ValueRef reduce_sum(Builder& b, ValueRef x, Axes axes, bool keep_dims) { return reduce(b, "ReduceSum", x, axes, keep_dims); }
ValueRef reduce_mean(Builder& b, ValueRef x, Axes axes, bool keep_dims) { return reduce(b, "ReduceMean", x, axes, keep_dims); }
ValueRef reduce_max(Builder& b, ValueRef x, Axes axes, bool keep_dims) { return reduce(b, "ReduceMax", x, axes, keep_dims); }
ValueRef argmax(Builder& b, ValueRef x, int64_t axis) {
  return b.add_value({.op = "ArgMax", .inputs = {x}, .attrs = {{"axis", axis}}});
}

}  // namespace mirra::ops
