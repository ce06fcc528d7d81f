// GpuDevice: device memory, library handles on the compute stream, copies to and from the host.
#include "runtime/cuda/gpu_device.h"

#include <cstring>

#include "runtime/cpu/caching_allocator.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/tensor.h"

namespace mirra::runtime::cuda {

namespace {

// Device memory of one GPU, for the CachingAllocator.
class DeviceMemory final : public SystemMemory {
 public:
  explicit DeviceMemory(int ordinal) : ordinal_(ordinal) {}
  void* allocate(size_t bytes) noexcept override {
    void* block = nullptr;
    // cudaMalloc aligns to at least 256 bytes.
    if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMalloc(&block, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return block;
  }
  void free(void* block, size_t) noexcept override {
    (void)cudaSetDevice(ordinal_);
    (void)cudaFree(block);
  }
  bool host_addressable() const override { return false; }

 private:
  int ordinal_;
};

// Page-locked host memory: the GPU copies to and from it without staging, asynchronously.
class PinnedMemory final : public SystemMemory {
 public:
  void* allocate(size_t bytes) noexcept override {
    void* block = nullptr;
    if (cudaHostAlloc(&block, bytes, cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return block;
  }
  void free(void* block, size_t) noexcept override { (void)cudaFreeHost(block); }
  bool page_locked() const override { return true; }
};

}  // namespace

GpuDevice::GpuDevice(int ordinal, int physical, int64_t memory_limit, const GpuOptions& options)
    : GpuDevice(ordinal, physical, memory_limit, options,
                std::make_shared<GpuStream>(physical, "gpu:" + std::to_string(ordinal)),
                std::make_shared<GpuStream>(physical, "gpu:" + std::to_string(ordinal) + " communication")) {}

// Logical GPUs of one physical GPU share its memory space (named by the first of them), each with
// its own allocator, stream and, with a limit, budget.
GpuDevice::GpuDevice(int ordinal, int physical, int64_t memory_limit, const GpuOptions& options,
                     std::shared_ptr<GpuStream> stream, std::shared_ptr<GpuStream> communication)
    : Device({DeviceKind::gpu, ordinal},
             std::make_shared<CachingAllocator>(
                 "gpu:" + std::to_string(ordinal), memory_limit > 0 ? std::make_shared<MemoryBudget>(memory_limit) : nullptr,
                 MemorySpace::of_device(graph::memory_owner({DeviceKind::gpu, ordinal}, options.logical_gpus_per_gpu)),
                 nullptr, std::make_shared<DeviceMemory>(physical)),
             stream, /*intra_op_threads=*/1, communication),
      options_(options),
      physical_(physical),
      stream_(std::move(stream)),
      copy_stream_(std::make_unique<GpuStream>(physical, "gpu:" + std::to_string(ordinal) + " copies")),
      communication_stream_(std::move(communication)),
      pinned_(std::make_shared<CachingAllocator>("gpu:" + std::to_string(ordinal) + " pinned host", nullptr,
                                                 MemorySpace::host_memory(), nullptr, std::make_shared<PinnedMemory>())) {
  try {
    MIRRA_CUDA_THROW_IF_ERROR(cublasCreate(&cublas_));
    MIRRA_CUDA_THROW_IF_ERROR(cublasSetStream(cublas_, stream_->handle()));
    // FP32 products in FP32 unless TF32 is allowed (MatMul chooses per call; this is the default);
    // in deterministic mode no reduced-precision reductions either.
    MIRRA_CUDA_THROW_IF_ERROR(cublasSetMathMode(
        cublas_, options.deterministic
                     ? static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                     : CUBLAS_DEFAULT_MATH));
    MIRRA_CUDA_THROW_IF_ERROR(cudnnCreate(&cudnn_));
    MIRRA_CUDA_THROW_IF_ERROR(cudnnSetStream(cudnn_, stream_->handle()));
  } catch (...) {
    if (cudnn_ != nullptr) (void)cudnnDestroy(cudnn_);
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    throw;
  }
}

GpuDevice::~GpuDevice() {
  communication_stream_->synchronize();
  copy_stream_->synchronize();
  stream_->synchronize();
  (void)cudnnDestroy(cudnn_);
  (void)cublasDestroy(cublas_);
}

namespace {

// A copy of `from` into `to` on the device's stream, waited for; DeviceError when CUDA fails.
void copy_and_wait(const GpuDevice& device, Tensor& to, const Tensor& from, cudaMemcpyKind kind) {
  graph::Status status;
  const MemorySpace space = device.memory_space();
  device.compute_stream().enqueue([&] {
    ScopedMemoryAccess access(space, /*host_too=*/true);
    if (from.byte_size() == 0) return;
    status = check(cudaMemcpyAsync(to.mutable_raw_data(), from.raw_data(), from.byte_size(), kind, device.stream()),
                   "cudaMemcpyAsync");
  });
  if (status.ok()) status = check(cudaStreamSynchronize(device.stream()), "cudaStreamSynchronize");
  if (!status.ok()) throw DeviceError(status.with_context(device.id().to_string()));
}

}  // namespace

Tensor GpuDevice::copy_to_host(const Tensor& tensor) const {
  Tensor to = Tensor::empty(host_allocator(), tensor.dtype(), tensor.shape());
  copy_and_wait(*this, to, tensor, tensor.memory_space().host ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost);
  return to;
}

Tensor GpuDevice::copy_from_host(const Tensor& tensor) const {
  Tensor to = Tensor::empty(allocator(), tensor.dtype(), tensor.shape());
  copy_and_wait(*this, to, tensor, cudaMemcpyHostToDevice);
  return to;
}

graph::Status GpuDevice::enqueue_copy(const Tensor& from, Tensor to) const {
  MIRRA_CHECK(from.byte_size() == to.byte_size(), "a copy between tensors of different sizes");
  if (from.byte_size() == 0) return graph::Status();
  graph::Status status;
  const MemorySpace space = memory_space();
  stream_->enqueue([&] {
    ScopedMemoryAccess access(space, /*host_too=*/true);
    status = check(cudaMemcpyAsync(to.mutable_raw_data(), from.raw_data(), from.byte_size(), cudaMemcpyDefault,
                                   stream_->handle()),
                   "cudaMemcpyAsync");
  });
  return status.with_context(id().to_string());
}

Device::Staged GpuDevice::stage_from_host(const Tensor& tensor) const {
  Tensor to = Tensor::empty(allocator(), tensor.dtype(), tensor.shape());
  if (tensor.byte_size() == 0) return {std::move(to), nullptr};
  // From pinned memory the copy runs asynchronously (from pageable memory CUDA would stage it itself
  // and block the caller).
  Tensor staging = Tensor::empty(pinned_, tensor.dtype(), tensor.shape());
  std::memcpy(staging.mutable_raw_data(), tensor.raw_data(), tensor.byte_size());
  // After the compute work queued before the allocation, which may still use the block; not while a
  // step is recorded, when there is none and the wait would join the copy stream into the capture.
  if (!stream_->recording()) copy_stream_->wait(stream_->record());
  graph::Status status;
  const MemorySpace space = memory_space();
  copy_stream_->enqueue([&] {
    ScopedMemoryAccess access(space, /*host_too=*/true);
    status = check(cudaMemcpyAsync(to.mutable_raw_data(), staging.raw_data(), tensor.byte_size(), cudaMemcpyHostToDevice,
                                   copy_stream_->handle()),
                   "cudaMemcpyAsync");
  });
  if (!status.ok()) throw DeviceError(status.with_context(id().to_string() + " staging a feed"));
  std::shared_ptr<Event> ready = copy_stream_->record();
  ready->then([staging = std::move(staging)] {});  // the pinned buffer goes once the device read it
  return {std::move(to), std::move(ready)};
}

}  // namespace mirra::runtime::cuda
