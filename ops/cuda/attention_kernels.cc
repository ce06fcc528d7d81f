// GPU kernels of ScaledDotProductAttention and its gradient, host side: the geometry checked as on the
// CPU (ops/kernel_shapes.h), the outputs, and the per-query scratch of the backward pass.
#include "ops/cuda/gpu_kernel.h"
#include "ops/kernel_shapes.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

Status attention_kernel(KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(ctx, 0, 3));
  const DType dtype = ctx.input(0).dtype();
  Tensor& o = ctx.allocate_output(0, dtype, TensorShape{g.batch, g.heads, g.t, g.e});
  Tensor& lse = ctx.allocate_output(1, dtype, TensorShape{g.batch, g.heads, g.t});
  const void* mask = ctx.num_inputs() == 4 ? ctx.input(3).raw_data() : nullptr;
  return launched(attention_forward(dtype, g, ctx.input(0).raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(), mask,
                                    o.mutable_raw_data(), lse.mutable_raw_data(), stream_of(ctx)),
                  "attention_forward");
}

Status attention_grad_kernel(KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(ctx, 1, 6));
  const Tensor& d_out = ctx.input(0);
  if (!(d_out.shape() == ctx.input(4).shape()) || !(d_out.shape() == TensorShape{g.batch, g.heads, g.t, g.e}) ||
      ctx.input(5).num_elements() != g.batch * g.heads * g.t) {
    return graph::invalid_argument("dO " + d_out.type_string() + ", o " + ctx.input(4).type_string() + " and lse " +
                                   ctx.input(5).type_string() + " do not match the attention's output");
  }
  Tensor& dq = ctx.allocate_output(0, d_out.dtype(), ctx.input(1).shape());
  Tensor& dk = ctx.allocate_output(1, d_out.dtype(), ctx.input(2).shape());
  Tensor& dv = ctx.allocate_output(2, d_out.dtype(), ctx.input(3).shape());
  Tensor delta = Tensor::empty(gpu_of(ctx).allocator(), d_out.dtype(), TensorShape{g.batch * g.heads * g.t});
  const void* mask = ctx.num_inputs() == 7 ? ctx.input(6).raw_data() : nullptr;
  return launched(attention_backward(d_out.dtype(), g, d_out.raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(),
                                     ctx.input(3).raw_data(), ctx.input(4).raw_data(), ctx.input(5).raw_data(), mask,
                                     delta.mutable_raw_data(), dq.mutable_raw_data(), dk.mutable_raw_data(), dv.mutable_raw_data(),
                                     stream_of(ctx)),
                  "attention_backward");
}

}  // namespace

void register_gpu_attention_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64});
  kernels.add("ScaledDotProductAttention", DeviceKind::gpu, {.fn = attention_kernel, .dtypes = floats});
  kernels.add("ScaledDotProductAttentionGrad", DeviceKind::gpu, {.fn = attention_grad_kernel, .dtypes = floats});
}

}  // namespace mirra::ops::cuda
