// GPU kernels of dynamic loss scaling, host side: AllFinite counts the NaNs and infinities of its
// inputs on the device and leaves its verdict there, where the gated updates read it;
// UpdateLossScale moves the device's scale and count of good steps by that verdict.
#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

Status all_finite_kernel(KernelContext& ctx) {
  const runtime::cuda::GpuDevice& gpu = gpu_of(ctx);
  Tensor counts = Tensor::empty(gpu.allocator(), DType::i64, TensorShape{2});
  auto* device_counts = static_cast<unsigned long long*>(counts.mutable_raw_data());
  MIRRA_RETURN_IF_ERROR(
      runtime::cuda::check(cudaMemsetAsync(device_counts, 0, counts.byte_size(), gpu.stream()), "cudaMemsetAsync"));
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    MIRRA_RETURN_IF_ERROR(launched(count_non_finite(x.dtype(), x.raw_data(), x.num_elements(), device_counts, gpu.stream()),
                                   "count_non_finite"));
  }
  Tensor& finite = ctx.allocate_output(0, DType::boolean, TensorShape{});
  return launched(none_counted(device_counts, finite.mutable_data<bool>(), gpu.stream()), "none_counted");
}

Status update_loss_scale_kernel(KernelContext& ctx) {
  return launched(update_loss_scale(ctx.input_for_update(0).mutable_data<float>(),
                                    ctx.input_for_update(1).mutable_data<int64_t>(), ctx.input(2).data<bool>(),
                                    ctx.attr<int64_t>("growth_steps"), stream_of(ctx)),
                  "update_loss_scale");
}

}  // namespace

void register_gpu_loss_scale_kernels(runtime::KernelRegistry& kernels) {
  kernels.add("AllFinite", DeviceKind::gpu, {.fn = all_finite_kernel, .expensive = true});
  kernels.add("UpdateLossScale", DeviceKind::gpu, {update_loss_scale_kernel});
}

}  // namespace mirra::ops::cuda
