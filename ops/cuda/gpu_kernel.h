// What the host side of every GPU kernel uses: the node's GPU device and its stream, a launch's
// result as a Status naming the kernel, and the registration functions of the kernel families
// (cuda_kernels.cc calls them all).
#pragma once

#include <vector>

#include "ops/cuda/device_kernels.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/gpu_device.h"
#include "runtime/kernel.h"

namespace mirra::ops::cuda {

using graph::Status;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

inline const runtime::cuda::GpuDevice& gpu_of(const KernelContext& ctx) {
  return static_cast<const runtime::cuda::GpuDevice&>(ctx.device());
}
inline cudaStream_t stream_of(const KernelContext& ctx) { return gpu_of(ctx).stream(); }

// x's dims split into kept and reduced ones (dims of size 1 dropped from both), with x's strides: what
// `reduce` (device_kernels.h) reduces over `axes` (sorted).
ReduceGeometry reduce_geometry(const TensorShape& x, const std::vector<int>& axes);

// A launch function's result: ok, or an error naming the CUDA kernel.
inline Status launched(cudaError_t result, const char* kernel) { return runtime::cuda::check(result, kernel); }

void register_gpu_array_kernels(runtime::KernelRegistry& kernels);
void register_gpu_attention_kernels(runtime::KernelRegistry& kernels);
void register_gpu_batch_norm_kernels(runtime::KernelRegistry& kernels);
void register_gpu_conv_kernels(runtime::KernelRegistry& kernels);
void register_gpu_elementwise_kernels(runtime::KernelRegistry& kernels);
void register_gpu_reduce_kernels(runtime::KernelRegistry& kernels);
void register_gpu_loss_scale_kernels(runtime::KernelRegistry& kernels);
void register_gpu_training_kernels(runtime::KernelRegistry& kernels);
void register_gpu_matmul_kernels(runtime::KernelRegistry& kernels);
void register_gpu_memory_kernels(runtime::KernelRegistry& kernels);
void register_gpu_nccl_kernels(runtime::KernelRegistry& kernels);
// An AllReduce rank whose peers share this GPU's memory (collective_kernels.cc); the AllReduce kernel
// (nccl_kernels.cc) hands it those with `shared_memory`.
void shared_memory_all_reduce(KernelContext& ctx, runtime::KernelDone done);
void register_gpu_pool_kernels(runtime::KernelRegistry& kernels);
void register_gpu_sequence_kernels(runtime::KernelRegistry& kernels);

}  // namespace mirra::ops::cuda
