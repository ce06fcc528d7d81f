// GPU kernels of FusedBatchNormV3, SyncFusedBatchNorm and FusedBatchNormGradV3, host side: the checks the CPU kernels
// make (ops/batch_norm_layout.h), the outputs, and the launches of batch_norm_kernels.cu.
#include "ops/batch_norm_layout.h"
#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

DType param_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

BatchNormGeometry geometry_of(const BatchNormLayout& l, const KernelContext& ctx, bool with_factor) {
  return {.outer = l.outer,
          .channels = l.channels,
          .inner = l.inner,
          .epsilon = ctx.attr<double>("epsilon"),
          .factor = with_factor ? ctx.attr<double>("exponential_avg_factor") : 1.0,
          .training = ctx.attr<bool>("is_training")};
}

// FusedBatchNormV3, and with `kSynchronised` SyncFusedBatchNorm (inputs 5 to 7: the whole batch's
// statistics and their count).
template <bool kSynchronised>
Status fused_batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const BatchNormLayout l = batch_norm_layout(x, ctx.attr<std::string>("data_format"));
  const BatchNormGeometry g = geometry_of(l, ctx, true);
  const bool given_statistics = !g.training || g.factor != 1.0;
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(1), "scale", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(2), "offset", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(3), "mean", l.channels, !given_statistics));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(4), "variance", l.channels, !given_statistics));
  const void* given[3] = {nullptr, nullptr, nullptr};
  if constexpr (kSynchronised) {
    MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(5), "batch_mean", l.channels, false));
    MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(6), "batch_variance", l.channels, false));
    for (size_t i = 0; i < 3; ++i) given[i] = ctx.input(5 + i).raw_data();
  }
  const DType u = param_dtype(x.dtype());
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  void* statistics[4];
  for (size_t i = 1; i <= 4; ++i) statistics[i - 1] = ctx.allocate_output(i, u, {l.channels}).mutable_raw_data();
  ctx.allocate_output(5, u, {0});
  Tensor scratch = Tensor::empty(gpu_of(ctx).allocator(), u, TensorShape{3 * l.channels});
  return launched(fused_batch_norm(x.dtype(), x.raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(),
                                   ctx.input(3).raw_data(), ctx.input(4).raw_data(), y.mutable_raw_data(), statistics[0],
                                   statistics[1], statistics[2], statistics[3], scratch.mutable_raw_data(), given[0], given[1],
                                   given[2], g, stream_of(ctx)),
                  "fused_batch_norm");
}

Status fused_batch_norm_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (!(dy.shape() == x.shape())) {
    return graph::invalid_argument("y_backprop " + dy.shape().to_string() + " and x " + x.shape().to_string() + " differ");
  }
  const BatchNormLayout l = batch_norm_layout(x, ctx.attr<std::string>("data_format"));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(2), "scale", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(3), "reserve_space_1", l.channels, false));
  MIRRA_RETURN_IF_ERROR(check_per_channel(ctx.input(4), "reserve_space_2", l.channels, false));
  const DType u = param_dtype(x.dtype());
  Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& dscale = ctx.allocate_output(1, u, {l.channels});
  Tensor& doffset = ctx.allocate_output(2, u, {l.channels});
  for (size_t i = 3; i <= 4; ++i) {  // zero scalars, as TensorFlow returns them
    Tensor& unused = ctx.allocate_output(i, u, {});
    MIRRA_RETURN_IF_ERROR(runtime::cuda::check(cudaMemsetAsync(unused.mutable_raw_data(), 0, unused.byte_size(), stream_of(ctx)),
                                               "cudaMemsetAsync"));
  }
  Tensor scratch = Tensor::empty(gpu_of(ctx).allocator(), u, TensorShape{4 * l.channels});
  return launched(fused_batch_norm_grad(x.dtype(), dy.raw_data(), x.raw_data(), ctx.input(2).raw_data(),
                                        ctx.input(3).raw_data(), ctx.input(4).raw_data(), dx.mutable_raw_data(),
                                        dscale.mutable_raw_data(), doffset.mutable_raw_data(), scratch.mutable_raw_data(),
                                        geometry_of(l, ctx, false), stream_of(ctx)),
                  "fused_batch_norm_grad");
}

}  // namespace

void register_gpu_batch_norm_kernels(runtime::KernelRegistry& kernels) {
  kernels.add("FusedBatchNormV3", DeviceKind::gpu, {.fn = fused_batch_norm_kernel<false>, .expensive = true});
  kernels.add("SyncFusedBatchNorm", DeviceKind::gpu, {.fn = fused_batch_norm_kernel<true>, .expensive = true});
  kernels.add("FusedBatchNormGradV3", DeviceKind::gpu, {.fn = fused_batch_norm_grad_kernel, .expensive = true});
}

}  // namespace mirra::ops::cuda
