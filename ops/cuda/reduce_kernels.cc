// GPU kernels of the reductions, host side: ReduceSum/Mean/Max and SumToShape as a ReduceGeometry
// over kept and reduced dims, ArgMax as [outer, n, inner].
#include "ops/cuda/gpu_kernel.h"
#include "ops/kernel_shapes.h"
#include "ops/reduce_geometry.h"

namespace mirra::ops::cuda {

ReduceGeometry reduce_geometry(const TensorShape& x, const std::vector<int>& axes) {
  ReduceGeometry g;
  g.outputs = 1;
  g.reduced = 1;
  int64_t stride = 1;
  int64_t strides[kMaxRank] = {};
  for (int d = x.rank() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= x.dim(d);
  }
  for (int d = 0; d < x.rank(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (reduced) {
      g.reduced *= x.dim(d);
      if (x.dim(d) == 1) continue;
      g.reduced_dims[g.reduced_rank] = x.dim(d);
      g.reduced_strides[g.reduced_rank++] = strides[d];
    } else {
      g.outputs *= x.dim(d);
      if (x.dim(d) == 1) continue;
      g.kept_dims[g.kept_rank] = x.dim(d);
      g.kept_strides[g.kept_rank++] = strides[d];
    }
  }
  return g;
}

namespace {

using graph::DeviceKind;
using graph::DType;

template <ReduceOp kOp>
Status reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto axes = *reduced_axes(ctx.node(), x.rank());
  Tensor& y = ctx.allocate_output(0, x.dtype(), reduced_shape(x.shape(), axes, ctx.attr<bool>("keep_dims")));
  return launched(reduce(kOp, x.dtype(), x.raw_data(), y.mutable_raw_data(), reduce_geometry(x.shape(), axes), stream_of(ctx)),
                  "reduce");
}

Status sum_to_shape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& like = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const std::vector<int> axes, sum_to_shape_axes(x, like));
  if (x.shape() == like.shape()) {  // nothing was broadcast: x itself
    ctx.set_output(0, x);
    return Status();
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), like.shape());
  return launched(reduce(ReduceOp::sum, x.dtype(), x.raw_data(), y.mutable_raw_data(), reduce_geometry(x.shape(), axes),
                         stream_of(ctx)),
                  "reduce");
}

Status argmax_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const ArgMaxGeometry g, argmax_geometry(ctx, x));
  Tensor& y = ctx.allocate_output(0, DType::i64, g.output);
  return launched(argmax(x.dtype(), x.raw_data(), y.mutable_data<int64_t>(), g.outer, g.n, g.inner, stream_of(ctx)), "argmax");
}

}  // namespace

void register_gpu_reduce_kernels(runtime::KernelRegistry& kernels) {
  kernels.add("ReduceSum", DeviceKind::gpu, {reduce_kernel<ReduceOp::sum>});
  kernels.add("ReduceMean", DeviceKind::gpu, {reduce_kernel<ReduceOp::mean>});
  kernels.add("ReduceMax", DeviceKind::gpu, {reduce_kernel<ReduceOp::max>});
  kernels.add("SumToShape", DeviceKind::gpu, {sum_to_shape_kernel});
  kernels.add("ArgMax", DeviceKind::gpu, {argmax_kernel});
}

}  // namespace mirra::ops::cuda
