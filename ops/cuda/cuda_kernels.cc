// register_cuda_kernels: every GPU kernel family.
#include "ops/cuda/cuda_kernels.h"

#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops {

void register_cuda_kernels(runtime::KernelRegistry& kernels) {
  cuda::register_gpu_array_kernels(kernels);
  cuda::register_gpu_batch_norm_kernels(kernels);
  cuda::register_gpu_nccl_kernels(kernels);
  cuda::register_gpu_conv_kernels(kernels);
  cuda::register_gpu_elementwise_kernels(kernels);
  cuda::register_gpu_reduce_kernels(kernels);
  cuda::register_gpu_loss_scale_kernels(kernels);
  cuda::register_gpu_training_kernels(kernels);
  cuda::register_gpu_matmul_kernels(kernels);
  cuda::register_gpu_memory_kernels(kernels);
  cuda::register_gpu_pool_kernels(kernels);
  cuda::register_gpu_sequence_kernels(kernels);
  cuda::register_gpu_attention_kernels(kernels);
}

}  // namespace mirra::ops
