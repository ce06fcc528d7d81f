// The runtime's registry of device kinds: how to open a kind's devices and the questions passes and
// plans ask of a kind (instead of comparing kinds across the tree). cpu, cpu_async and gpu are
// registered here; a backend outside the tree adds its kind with one call, before it names one of
// its devices:
//
//   graph::Expected<DeviceKind> xpu = runtime::register_device_kind(
//       {.name = "xpu", .own_memory = true},
//       {.open = [](const DeviceOpening& o) { return open_xpu_device(o); }, .runs_kernels_of = DeviceKind::cpu});
//   // "xpu:0" now parses, opens in a DeviceSet, takes the CPU's kernels and replicates under Mirrored.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "graph/device_id.h"
#include "graph/status.h"
#include "runtime/gpu_devices.h"
#include "runtime/memory_budget.h"

namespace mirra::runtime {

class Communicator;
class Device;

// What opening one device is given.
struct DeviceOpening {
  graph::DeviceId id;
  int intra_op_threads = 1;              // its share of the session's threads
  std::shared_ptr<MemoryBudget> budget;  // host memory shared by the session's devices, or null
  GpuOptions options;                    // logical devices per physical one, and how GPUs compute
};

struct DeviceKindSpec {
  // The device, or unavailable saying why (none on this machine, a build without its backend).
  std::function<graph::Expected<std::unique_ptr<Device>>(const DeviceOpening&)> open;
  // Ok when device `id` exists here with `logical_per_physical` logical devices per physical one,
  // else unavailable saying why; asked when a strategy is made. None: every ordinal exists.
  std::function<graph::Status(graph::DeviceId id, int logical_per_physical)> check_available;
  // A kind whose kernel it runs for an op that has none of its own (cpu_async runs the CPU's).
  std::optional<graph::DeviceKind> runs_kernels_of;
  // What its devices sum among themselves with when each replica holds its own memory (the
  // all-reduce plan's peer path): the name of a communicator that every session with devices of this
  // kind offers ("nccl"), taking their memory, and how to make one (null where this build has none).
  // Empty: the session's in-process collective, staged through the host.
  std::string peer_communicator;
  std::function<std::shared_ptr<Communicator>()> make_peer_communicator;
  // Its 16-bit convolutions need channel counts that are multiples of this (tensor cores: 8); mixed
  // precision keeps the others in f32.
  int sixteen_bit_channel_multiple = 1;
  // It computes with the host CPU's kernels (whose bf16 support the runner reports).
  bool computes_on_host_cpu = false;
  // Mixed precision keeps bf16 activations between its products where the CPU multiplies bf16
  // (ops/sixteen_bit_activations.h): products in host memory, where reading them in f32 costs.
  bool keeps_bf16_activations = false;
};

// A new kind (graph::register_device_kind) that the runtime opens and asks as `spec` says; its
// errors. `spec.open` is required.
graph::Expected<graph::DeviceKind> register_device_kind(graph::DeviceKindTraits traits, DeviceKindSpec spec);

// What the runtime knows of `kind`, or null for a kind registered with the graph alone.
const DeviceKindSpec* find_device_kind_spec(graph::DeviceKind kind);
// The spec of a kind the runtime knows (a kind registered with the graph alone is a bug).
const DeviceKindSpec& device_kind_spec(graph::DeviceKind kind);

// Opens `opening.id` by its kind's spec; unavailable for a kind the runtime does not know.
graph::Expected<std::unique_ptr<Device>> open_device(const DeviceOpening& opening);
// Ok when device `id` exists here (DeviceKindSpec::check_available), else unavailable saying why.
graph::Status check_available(graph::DeviceId id, int logical_per_physical);

// The built-in kinds' specs, each defined beside its devices: runtime/cpu/cpu_devices.cc (cpu,
// cpu_async) and runtime/gpu_device_kind.cc (gpu, over the seam of runtime/gpu_devices.h).
DeviceKindSpec cpu_device_kind();
DeviceKindSpec cpu_async_device_kind();
DeviceKindSpec gpu_device_kind();

}  // namespace mirra::runtime
