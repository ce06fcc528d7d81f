// The GPUs of this machine through the CUDA runtime, their software versions, and opening one.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/gpu_device.h"
#include "runtime/gpu_devices.h"

namespace mirra::runtime {

namespace {

// CUDA's packed versions (major * 1000 + minor * 10) as "major.minor".
std::string cuda_version(int packed) {
  if (packed <= 0) return "";
  return std::to_string(packed / 1000) + "." + std::to_string(packed % 1000 / 10);
}

std::string dotted(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

bool built_with_cuda() { return true; }

graph::Expected<std::vector<GpuInfo>> list_gpus() {
  int count = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count == 0) return graph::unavailable("no CUDA device");
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties{};
    MIRRA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, i));
    gpus.push_back({.ordinal = i,
                    .name = properties.name,
                    .memory_bytes = static_cast<int64_t>(properties.totalGlobalMem),
                    .compute_major = properties.major,
                    .compute_minor = properties.minor,
                    .multiprocessors = properties.multiProcessorCount});
  }
  return gpus;
}

GpuSoftware gpu_software() {
  GpuSoftware software;
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) software.driver = cuda_version(driver);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) software.runtime = cuda_version(runtime);
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    software.cublas = dotted(major, minor, patch);
  }
  // cuDNN 9: major * 10000 + minor * 100 + patch.
  const size_t cudnn = cudnnGetVersion();
  software.cudnn = dotted(static_cast<int>(cudnn / 10000), static_cast<int>(cudnn % 10000 / 100), static_cast<int>(cudnn % 100));
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) software.nccl = dotted(nccl / 10000, nccl % 10000 / 100, nccl % 100);
  (void)cudaGetLastError();
  return software;
}

graph::Expected<std::unique_ptr<Device>> open_gpu_device(int ordinal, const GpuOptions& options) {
  const std::string name = "gpu:" + std::to_string(ordinal);
  graph::Expected<std::vector<GpuInfo>> gpus = list_gpus();
  if (!gpus.ok()) return graph::unavailable(name + ": " + gpus.status().message());
  const int per_gpu = options.logical_gpus_per_gpu;
  const int physical = graph::physical_ordinal({graph::DeviceKind::gpu, ordinal}, per_gpu);
  if (physical >= static_cast<int>(gpus->size())) {
    return graph::unavailable(name + ": this machine has " + std::to_string(gpus->size()) + " GPU" +
                              (gpus->size() == 1 ? "" : "s") +
                              (per_gpu > 1 ? " (" + std::to_string(per_gpu) + " logical GPUs each)" : ""));
  }
  const int64_t memory_limit = per_gpu > 1 ? (*gpus)[static_cast<size_t>(physical)].memory_bytes / per_gpu : 0;
  try {
    return std::unique_ptr<Device>(std::make_unique<cuda::GpuDevice>(ordinal, physical, memory_limit, options));
  } catch (const DeviceError& e) {
    return e.status().with_context(name);
  }
}

}  // namespace mirra::runtime
