// What the runtime knows of GPUs without CUDA headers: whether this build has the CUDA backend, the
// GPUs found with their software, and opening one as a Device. With CUDA the answers come from
// runtime/cuda/gpu_devices.cc; a build without it has no GPUs (gpu_devices_without_cuda.cc).
//
//   auto gpus = runtime::list_gpus();  // unavailable, with the reason, when there are none
//   if (gpus.ok()) for (const GpuInfo& gpu : *gpus) std::cout << gpu.name << "\n";
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/status.h"

namespace mirra::runtime {

class Communicator;
class Device;

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  int64_t memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
};

// Versions as "major.minor[.patch]"; empty when the build or the machine lacks the piece.
// How GPU devices are laid out and compute.
struct GpuOptions {
  // f32 matrix products and convolutions may run in TF32 (tensor cores, a 10-bit mantissa): faster,
  // less exact. Off by default, as PyTorch's matmuls: results then follow the CPU's within float
  // rounding.
  bool allow_tf32 = false;
  // Logical GPUs per physical GPU (graph/device_id.h): gpu:<i> runs on GPU i / k with a stream of its
  // own and, for k > 1, a memory limit of 1/k of the GPU's memory. cpu_async devices split the same way.
  int logical_gpus_per_gpu = 1;
  // Only what gives the same bits every run (deterministic mode): cuDNN's deterministic convolution
  // algorithms (some backward ones sum with atomics), and cuBLAS without reduced-precision
  // reductions in split-K products.
  bool deterministic = false;
};

struct GpuSoftware {
  std::string driver, runtime, cublas, cudnn, nccl;
};

// True in a build with the CUDA backend.
bool built_with_cuda();
// The GPUs of this machine; unavailable with the reason (no CUDA backend, no driver, no device).
graph::Expected<std::vector<GpuInfo>> list_gpus();
GpuSoftware gpu_software();
// Logical GPU `ordinal` as a device (gpu:<ordinal>, on GPU ordinal / options.logical_gpus_per_gpu),
// or unavailable naming it and why.
graph::Expected<std::unique_ptr<Device>> open_gpu_device(int ordinal, const GpuOptions& options = {});
// A session's communicator among its GPUs ("nccl": runtime/cuda/nccl_communicator.cc); null in a
// build without the CUDA backend.
std::shared_ptr<Communicator> make_gpu_peer_communicator();

}  // namespace mirra::runtime
