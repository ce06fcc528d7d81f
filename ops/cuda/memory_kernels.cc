// GPU kernels that move memory: the copies placement inserts (to pinned host memory and back,
// asynchronously), Variable (initialised on the host on first use, then copied to the device), and
// Const (its value in host memory; placement copies it to the device where it is used); the kernels
// of the CPU that touch no elements.
#include <cstring>

#include "ops/cuda/gpu_kernel.h"
#include "ops/initializers.h"
#include "runtime/placement.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;

Status copy_to_host_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());  // pinned host memory (host_memory_outputs)
  if (x.byte_size() == 0) return Status();
  MIRRA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(y.mutable_raw_data(), x.raw_data(), x.byte_size(), cudaMemcpyDeviceToHost, stream_of(ctx)));
  return Status();
}

// Pinned host memory (a GPU allocator's page-locked blocks: another GPU's copy to the host, a feed or
// host value a recorded step holds) is copied from where it is, so a replay of a recorded step copies
// what is there then. Other host memory is copied into pinned staging memory first, so the copy to
// the device runs asynchronously (from pageable memory CUDA would wait for the stream). Either host
// buffer is held until the device read it. Whether a buffer is pinned is its allocator's to say: no
// driver call per copy.
Status copy_from_host_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  if (x.byte_size() == 0) return Status();
  const runtime::cuda::GpuDevice& gpu = gpu_of(ctx);
  Tensor source = x;
  if (!x.buffer()->page_locked()) {
    source = Tensor::empty(gpu.host_memory_allocator(), x.dtype(), x.shape());
    std::memcpy(source.mutable_raw_data(), x.raw_data(), x.byte_size());
  }
  MIRRA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(y.mutable_raw_data(), source.raw_data(), x.byte_size(), cudaMemcpyHostToDevice, gpu.stream()));
  gpu.gpu_stream().when_device_done([source = std::move(source)](const Status&) {});
  return Status();
}

Status variable_kernel(KernelContext& ctx) {
  const graph::Node& node = ctx.node();
  auto value = ctx.variables().get_or_create(node.name, [&]() -> graph::Expected<Tensor> {
    const runtime::MemorySpace space = ctx.device().memory_space();
    runtime::ScopedMemoryAccess with_host(space, /*host_too=*/true);  // the initialiser runs on the host
    MIRRA_ASSIGN_OR_RETURN(const Tensor initial, initial_variable_value(ctx, runtime::host_allocator()));
    Tensor on_device = Tensor::empty(ctx.device().allocator(), initial.dtype(), initial.shape());
    if (initial.byte_size() > 0) {
      MIRRA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(on_device.mutable_raw_data(), initial.raw_data(), initial.byte_size(),
                                                 cudaMemcpyHostToDevice, stream_of(ctx)));
      // Once per variable: wait, so that `initial` may go.
      MIRRA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_of(ctx)));
    }
    return on_device;
  });
  if (!value.ok()) return value.status();
  ctx.set_output(0, *value);
  return Status();
}

}  // namespace

void register_gpu_memory_kernels(runtime::KernelRegistry& kernels) {
  kernels.add(runtime::kCopyToHostOp, DeviceKind::gpu, {.fn = copy_to_host_kernel, .host_memory_outputs = 1});
  kernels.add(runtime::kCopyFromHostOp, DeviceKind::gpu, {.fn = copy_from_host_kernel, .host_memory_inputs = 1});
  kernels.add("Variable", DeviceKind::gpu, {variable_kernel});
  runtime::KernelDef constant = *kernels.find("Const", DeviceKind::cpu);
  constant.host_memory_outputs = 1;
  kernels.add("Const", DeviceKind::gpu, constant);
  // DimSize reads only a shape: its scalar is written on the host.
  runtime::KernelDef dim_size = *kernels.find("DimSize", DeviceKind::cpu);
  dim_size.host_memory_outputs = 1;
  kernels.add("DimSize", DeviceKind::gpu, dim_size);
  // Kernels that never touch elements (fed values, views, nothing) run on the GPU as they are.
  for (const char* op : {"Placeholder", "Identity", "Reshape", "ExpandDims", "Squeeze", "ReshapeLike", "SplitBatch", "NoOp"}) {
    kernels.share(op, DeviceKind::gpu, DeviceKind::cpu);
  }
  // Send and Recv move host memory, where their kernel definitions ask placement to bring their values.
  kernels.share("Send", DeviceKind::gpu, DeviceKind::cpu);
  kernels.share("Recv", DeviceKind::gpu, DeviceKind::cpu);
}

}  // namespace mirra::ops::cuda
