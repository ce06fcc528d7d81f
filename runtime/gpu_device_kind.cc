// The gpu device kind: CUDA GPUs, opened and listed through runtime/gpu_devices.h (the CUDA backend,
// or a build's answer that it has none), summing among themselves with NCCL (the "nccl" communicator).
#include "runtime/device.h"
#include "runtime/device_kinds.h"

namespace mirra::runtime {

DeviceKindSpec gpu_device_kind() {
  return {.open = [](const DeviceOpening& o) { return open_gpu_device(o.id.ordinal, o.options); },
          .check_available =
              [](graph::DeviceId id, int per_gpu) {
                const std::string where = "device " + id.to_string() + " is not available";
                const graph::Expected<std::vector<GpuInfo>> gpus = list_gpus();
                if (!gpus.ok()) return graph::unavailable(where + " (" + gpus.status().message() + ")");
                if (graph::physical_ordinal(id, per_gpu) < static_cast<int>(gpus->size())) return graph::Status();
                return graph::unavailable(where + " (this machine has " + std::to_string(gpus->size()) + " GPU" +
                                          (gpus->size() == 1 ? "" : "s") +
                                          (per_gpu > 1 ? ", " + std::to_string(per_gpu) + " logical GPUs each)" : ")"));
              },
          .peer_communicator = "nccl",
          .make_peer_communicator = make_gpu_peer_communicator,
          // cuDNN's 16-bit convolutions run on the tensor cores, whose NHWC paths take channel counts
          // in multiples of 8; others may have no algorithm at all (one input channel).
          .sixteen_bit_channel_multiple = 8};
}

}  // namespace mirra::runtime
