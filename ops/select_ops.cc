// SelectV2: then_value where a bool condition holds, else else_value, the three broadcast together as
// NumPy broadcasts (TensorFlow's SelectV2, which the masks of attention and the safe forms of
// gradients use). Its values may have any dtype: the kernel moves elements, it computes nothing.
#include "ops/array_ops.h"
#include "ops/cpu/broadcast.h"
#include "ops/cpu/element_copy.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"

namespace mirra::ops {

using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

Status select_kernel(KernelContext& ctx) {
  const Tensor& condition = ctx.input(0);
  const Tensor& then_value = ctx.input(1);
  const Tensor& else_value = ctx.input(2);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape shape, select_shape(condition, then_value, else_value));
  Tensor& out = ctx.allocate_output(0, then_value.dtype(), shape);
  const int rank = shape.rank();
  int64_t condition_strides[runtime::kMaxRank], then_strides[runtime::kMaxRank], else_strides[runtime::kMaxRank];
  cpu::broadcast_strides(condition.shape(), shape, condition_strides);
  cpu::broadcast_strides(then_value.shape(), shape, then_strides);
  cpu::broadcast_strides(else_value.shape(), shape, else_strides);
  const int64_t inner = rank > 0 ? shape.dim(rank - 1) : 1;
  if (inner == 0 || shape.num_elements() == 0) return Status();
  const int last = rank - 1;
  const int64_t c_step = rank > 0 ? condition_strides[last] : 0;
  const int64_t t_step = rank > 0 ? then_strides[last] : 0;
  const int64_t e_step = rank > 0 ? else_strides[last] : 0;
  const bool* pc = condition.data<bool>();
  cpu::with_element_type(then_value.dtype(), [&]<class E>(std::type_identity<E>) {
    const E* pt = static_cast<const E*>(then_value.raw_data());
    const E* pe = static_cast<const E*>(else_value.raw_data());
    E* po = static_cast<E*>(out.mutable_raw_data());
    cpu::parallel_for(shape.num_elements() / inner, std::max<int64_t>(1, cpu::kElementwiseGrain / inner), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t c = 0, t = 0, e = 0, rest = row;
        for (int d = rank - 2; d >= 0; --d) {
          const int64_t index = rest % shape.dim(d);
          rest /= shape.dim(d);
          c += index * condition_strides[d];
          t += index * then_strides[d];
          e += index * else_strides[d];
        }
        E* row_out = po + row * inner;
        for (int64_t i = 0; i < inner; ++i) row_out[i] = pc[c + i * c_step] ? pt[t + i * t_step] : pe[e + i * e_step];
      }
    });
  });
  return Status();
}

Expected<std::vector<TensorType>> infer_select(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::boolean}));
  if (ctx.input(1).dtype != ctx.input(2).dtype) return ctx.error("then and else values must have the same dtype");
  const auto values = broadcast_shapes(ctx.input(1).shape, ctx.input(2).shape);
  const auto all = values ? broadcast_shapes(ctx.input(0).shape, *values) : std::nullopt;
  if (!all) return ctx.error("condition, then and else values do not broadcast together");
  return std::vector<TensorType>{{ctx.input(1).dtype, *all}};
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// dy goes to then_value where the condition holds, to else_value elsewhere, each summed back to its shape.
Grads select_grad(GradientContext& g) {
  auto& b = g.builder;
  const ValueRef condition = g.input(0), then_value = g.input(1), else_value = g.input(2), dy = g.grad(0);
  if (!graph::is_floating(b.type(then_value).dtype)) return {ValueRef{}, ValueRef{}, ValueRef{}};
  const ValueRef zero = scalar_of(b, 0.0, dy);
  const ValueRef to_then = select(b, condition, dy, zero);
  const ValueRef to_else = select(b, condition, zero, dy);
  const ValueRef d_then = sum_to_shape(b, to_then, then_value);
  return {ValueRef{}, d_then, sum_to_shape(b, to_else, else_value)};
}

}  // namespace

void register_select_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "SelectV2",
                              .inputs = {"condition", "then_value", "else_value"},
                              .infer = infer_select,
                              .summary = "then_value where condition holds, else else_value; the three broadcast together.",
                              .gradient = select_grad});
  kernels.add("SelectV2", graph::DeviceKind::cpu, {select_kernel});
}

ValueRef select(Builder& b, ValueRef condition, ValueRef then_value, ValueRef else_value) {
  return b.add_value({.op = "SelectV2", .inputs = {condition, then_value, else_value}});
}

}  // namespace mirra::ops
