// The CPU's device kinds: cpu (host memory, kernels inline on the executor's threads) and cpu_async
// (the CPU's kernels on a stream of their own, in a memory space of their own: the GPU's model).
#include "runtime/cpu/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/device_kinds.h"

namespace mirra::runtime {

DeviceKindSpec cpu_device_kind() {
  return {.open =
              [](const DeviceOpening& o) -> graph::Expected<std::unique_ptr<Device>> {
                return std::make_unique<Device>(o.id, std::make_shared<CachingAllocator>(o.id.to_string(), o.budget),
                                                std::make_shared<InlineStream>(), o.intra_op_threads);
              },
          .computes_on_host_cpu = true,
          .keeps_bf16_activations = true};
}

DeviceKindSpec cpu_async_device_kind() {
  return {.open =
              [](const DeviceOpening& o) -> graph::Expected<std::unique_ptr<Device>> {
                const std::string name = o.id.to_string();
                auto stream = std::make_shared<WorkerStream>(name);
                const MemorySpace space = MemorySpace::of_device(graph::memory_owner(o.id, o.options.logical_gpus_per_gpu));
                auto allocator = std::make_shared<CachingAllocator>(name, o.budget, space, stream);
                return std::make_unique<Device>(o.id, std::move(allocator), std::move(stream), o.intra_op_threads,
                                                std::make_shared<WorkerStream>(name + " communication"),
                                                std::make_shared<WorkerStream>(name + " copies"));
              },
          .runs_kernels_of = DeviceKind::cpu,
          .computes_on_host_cpu = true};
}

}  // namespace mirra::runtime
