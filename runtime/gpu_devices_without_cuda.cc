// GPUs in a build without the CUDA backend: there are none, and saying so is the answer.
#include "runtime/collectives/communicator.h"
#include "runtime/device.h"
#include "runtime/gpu_devices.h"

namespace mirra::runtime {

namespace {
const char* const kNoBackend = "this build of mirra has no CUDA backend (built without the CUDA toolkit, cuDNN and NCCL)";
}

bool built_with_cuda() { return false; }

graph::Expected<std::vector<GpuInfo>> list_gpus() { return graph::unavailable(kNoBackend); }

GpuSoftware gpu_software() { return {}; }

graph::Expected<std::unique_ptr<Device>> open_gpu_device(int ordinal, const GpuOptions&) {
  return graph::unavailable("gpu:" + std::to_string(ordinal) + ": " + kNoBackend);
}

std::shared_ptr<Communicator> make_gpu_peer_communicator() { return nullptr; }

}  // namespace mirra::runtime
