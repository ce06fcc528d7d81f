// GpuDevice: gpu:<i>, one physical GPU or a logical GPU on one (graph/device_id.h). Its compute
// stream is a GpuStream; a second one copies staged feeds in while the compute stream runs
// (Device::stage_from_host), and a third runs NCCL's collectives beside it. Its memory comes from
// cudaMalloc through a CachingAllocator (size classes; after the first step no cudaMalloc or
// cudaFree; freeing needs no stream ordering because the compute stream runs the kernels in the
// order they allocate and free, and the other streams wait for it before they write a buffer just
// allocated), and its kernels' host-memory outputs from pinned host memory. It owns the cuBLAS and
// cuDNN handles bound to the compute stream; kernels reach them through KernelContext::device().
//
//   auto& gpu = static_cast<cuda::GpuDevice&>(ctx.device());
//   MIRRA_CUDA_RETURN_IF_ERROR(cublasSgemm(gpu.cublas(), ...));
#pragma once

#include <memory>

#include <cublas_v2.h>
#include <cudnn.h>

#include "runtime/cuda/gpu_stream.h"
#include "runtime/device.h"
#include "runtime/gpu_devices.h"

namespace mirra::runtime::cuda {

class GpuDevice final : public Device {
 public:
  // Opens logical GPU `ordinal` on physical GPU `physical`, its allocations capped at `memory_limit`
  // bytes (0: none but the GPU's); throws DeviceError when CUDA, cuBLAS or cuDNN refuse.
  GpuDevice(int ordinal, int physical, int64_t memory_limit, const GpuOptions& options);
  ~GpuDevice() override;

  GpuStream& gpu_stream() const { return *stream_; }
  // communication_stream(): where collectives between GPUs run (NCCL), beside the compute stream, so
  // the backward pass goes on while a bucket of gradients is summed.
  GpuStream& gpu_communication_stream() const { return *communication_stream_; }
  // The physical GPU this (logical) GPU runs on.
  int physical_ordinal() const { return physical_; }
  cudaStream_t stream() const { return stream_->handle(); }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  // Whether f32 products and convolutions may use TF32 (GpuOptions).
  bool allow_tf32() const { return options_.allow_tf32; }
  bool deterministic() const { return options_.deterministic; }

  // Pinned (page-locked) host memory, so copies between it and the GPU run asynchronously.
  const std::shared_ptr<Allocator>& host_memory_allocator() const override { return pinned_; }
  Tensor copy_to_host(const Tensor& tensor) const override;
  Tensor copy_from_host(const Tensor& tensor) const override;
  // Staged through pinned memory and copied on the copy stream, which first waits for the work
  // already on the compute stream (it may have freed the buffer the copy fills), not for later work.
  Staged stage_from_host(const Tensor& tensor) const override;
  // cudaMemcpyAsync on the compute stream, either way between the GPU and (pinned) host memory.
  graph::Status enqueue_copy(const Tensor& from, Tensor to) const override;

 private:
  GpuDevice(int ordinal, int physical, int64_t memory_limit, const GpuOptions& options, std::shared_ptr<GpuStream> stream,
            std::shared_ptr<GpuStream> communication);

  GpuOptions options_;
  int physical_;
  std::shared_ptr<GpuStream> stream_;
  std::unique_ptr<GpuStream> copy_stream_;           // feeds on their way in, beside the compute stream
  std::shared_ptr<GpuStream> communication_stream_;  // NCCL's collectives, beside the compute stream
  std::shared_ptr<Allocator> pinned_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
};

}  // namespace mirra::runtime::cuda
