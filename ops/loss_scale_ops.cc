// AllFinite and UpdateLossScale: schemas, builders and CPU kernels.
#include "ops/loss_scale_ops.h"

#include <atomic>
#include <cmath>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

Status all_finite_kernel(KernelContext& ctx) {
  std::atomic<bool> finite{true};
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    MIRRA_RETURN_IF_ERROR((cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
      const T* in = x.data<T>();
      cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        bool all = true;
        for (int64_t e = begin; e < end; ++e) all &= std::isfinite(in[e]);
        if (!all) finite = false;
      });
      return Status();
    })));
  }
  Tensor& out = ctx.allocate_output(0, DType::boolean, runtime::TensorShape{});
  out.mutable_data<bool>()[0] = finite.load();
  return Status();
}

Status update_loss_scale_kernel(KernelContext& ctx) {
  float& scale = ctx.input_for_update(0).mutable_data<float>()[0];
  int64_t& good_steps = ctx.input_for_update(1).mutable_data<int64_t>()[0];
  if (!ctx.input(2).data<bool>()[0]) {
    scale = std::max(scale / 2.0f, 1.0f);
    good_steps = 0;
    return Status();
  }
  if (++good_steps < ctx.attr<int64_t>("growth_steps")) return Status();
  if (std::isfinite(scale * 2.0f)) scale *= 2.0f;
  good_steps = 0;
  return Status();
}

Expected<std::vector<TensorType>> infer_all_finite(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, i, {DType::f32, DType::f64}));
  return std::vector<TensorType>{{DType::boolean, graph::Shape{}}};
}

Expected<std::vector<TensorType>> infer_update_loss_scale(const InferContext& ctx) {
  const auto scalar_of = [&](size_t i, DType dtype, const char* what) -> Status {
    if (ctx.input(i).dtype != dtype || ctx.input(i).shape.rank() != 0) return ctx.error(what);
    return Status();
  };
  MIRRA_RETURN_IF_ERROR(scalar_of(0, DType::f32, "the scale must be an f32 scalar"));
  MIRRA_RETURN_IF_ERROR(scalar_of(1, DType::i64, "the count of good steps must be an i64 scalar"));
  MIRRA_RETURN_IF_ERROR(scalar_of(2, DType::boolean, "finite must be a bool scalar"));
  if (ctx.attr<int64_t>("growth_steps") < 1) return ctx.error("growth_steps must be at least 1");
  return std::vector<TensorType>{};
}

}  // namespace

void register_loss_scale_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "AllFinite",
                              .inputs = {"values"},
                              .variadic = true,
                              .infer = infer_all_finite,
                              .summary = "A bool scalar: whether every element of every input is finite.",
                              .no_gradient = "it outputs a bool"});
  kernels.add("AllFinite", graph::DeviceKind::cpu, {.fn = all_finite_kernel, .expensive = true});
  schemas.add(graph::OpSchema{.name = "UpdateLossScale",
                              .inputs = {"scale", "good_steps", "finite"},
                              .attrs = {{"growth_steps", AttrType::integer, int64_t{2000}}},
                              .updates = {0, 1},
                              .infer = infer_update_loss_scale,
                              .summary = "Dynamic loss scaling after a step: finite, count it and double the scale "
                                         "every growth_steps; else halve it (not below 1) and restart the count.",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("UpdateLossScale", graph::DeviceKind::cpu, {update_loss_scale_kernel});
}

graph::ValueRef all_finite(graph::Builder& b, const std::vector<graph::ValueRef>& values) {
  return b.add_value({.op = "AllFinite", .inputs = values});
}

graph::NodeId update_loss_scale(graph::Builder& b, graph::ValueRef scale, graph::ValueRef good_steps,
                                graph::ValueRef finite, int64_t growth_steps) {
  return b.add({.op = "UpdateLossScale", .inputs = {scale, good_steps, finite}, .attrs = {{"growth_steps", growth_steps}}});
}

}  // namespace mirra::ops
