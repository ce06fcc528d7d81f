// GPU kernels of FusedBatchNormV3, FusedBatchNormEx, SyncFusedBatchNorm, FusedBatchNormGradV3 and
// FusedBatchNormGradEx, host side: the checks the CPU kernels make (ops/batch_norm_layout.h), the
// outputs, and the launches of batch_norm_kernels.cu.
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
// statistics and their count); with `kEpilogue` (FusedBatchNormEx, SyncFusedBatchNorm) the op's
// activation and its optional side input (input 5, or 8 when synchronised).
template <bool kSynchronised, bool kEpilogue>
Status fused_batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const BatchNormLayout l = batch_norm_layout(x, ctx.attr<std::string>("data_format"));
  BatchNormGeometry g = geometry_of(l, ctx, true);
  const void* side_input = nullptr;
  if constexpr (kEpilogue) {
    g.relu = ctx.attr<std::string>("activation") == "relu";
    const size_t side = kSynchronised ? 8 : 5;
    if (ctx.num_inputs() > side) {
      if (!(ctx.input(side).shape() == x.shape())) {
        return graph::invalid_argument("side_input " + ctx.input(side).shape().to_string() + " and x " +
                                       x.shape().to_string() + " differ");
      }
      side_input = ctx.input(side).raw_data();
    }
  }
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
                                   given[2], side_input, g, stream_of(ctx)),
                  "fused_batch_norm");
}

// FusedBatchNormGradV3, and with `kThroughActivation` FusedBatchNormGradEx (input 6 the activation's
// output; output 5 the gradient that passed it, when side_input_backprop).
template <bool kThroughActivation>
Status fused_batch_norm_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (!(dy.shape() == x.shape())) {
    return graph::invalid_argument("y_backprop " + dy.shape().to_string() + " and x " + x.shape().to_string() + " differ");
  }
  if (kThroughActivation && !(ctx.input(6).shape() == x.shape())) {
    return graph::invalid_argument("y " + ctx.input(6).shape().to_string() + " and x " + x.shape().to_string() + " differ");
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
  BatchNormGeometry g = geometry_of(l, ctx, false);
  const void* activated = nullptr;
  void* masked = nullptr;
  if constexpr (kThroughActivation) {
    g.relu = ctx.attr<std::string>("activation") == "relu";
    activated = ctx.input(6).raw_data();
    const bool side_input_backprop = ctx.attr<bool>("side_input_backprop");
    Tensor& out = ctx.allocate_output(5, x.dtype(), side_input_backprop ? x.shape() : TensorShape{0});
    if (side_input_backprop) masked = out.mutable_raw_data();
  }
  Tensor scratch = Tensor::empty(gpu_of(ctx).allocator(), u, TensorShape{4 * l.channels});
  return launched(fused_batch_norm_grad(x.dtype(), dy.raw_data(), x.raw_data(), ctx.input(2).raw_data(),
                                        ctx.input(3).raw_data(), ctx.input(4).raw_data(), activated, dx.mutable_raw_data(),
                                        dscale.mutable_raw_data(), doffset.mutable_raw_data(), masked,
                                        scratch.mutable_raw_data(), g, stream_of(ctx)),
                  "fused_batch_norm_grad");
}

}  // namespace

void register_gpu_batch_norm_kernels(runtime::KernelRegistry& kernels) {
  kernels.add("FusedBatchNormV3", DeviceKind::gpu, {.fn = fused_batch_norm_kernel<false, false>, .expensive = true});
  kernels.add("FusedBatchNormEx", DeviceKind::gpu, {.fn = fused_batch_norm_kernel<false, true>, .expensive = true});
  kernels.add("SyncFusedBatchNorm", DeviceKind::gpu, {.fn = fused_batch_norm_kernel<true, true>, .expensive = true});
  kernels.add("FusedBatchNormGradV3", DeviceKind::gpu, {.fn = fused_batch_norm_grad_kernel<false>, .expensive = true});
  kernels.add("FusedBatchNormGradEx", DeviceKind::gpu, {.fn = fused_batch_norm_grad_kernel<true>, .expensive = true});
}

}  // namespace mirra::ops::cuda
