// Devices: kernel support, copies between memory spaces, and sets of devices opened by kind.
#include "runtime/device.h"

#include <algorithm>
#include <cstring>

#include "runtime/device_kinds.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mirra::runtime {

Device::Device(DeviceId id, std::shared_ptr<Allocator> allocator, std::shared_ptr<Stream> stream, int intra_op_threads,
               std::shared_ptr<Stream> communication, std::shared_ptr<Stream> copies)
    : id_(id),
      allocator_(std::move(allocator)),
      stream_(std::move(stream)),
      intra_op_threads_(intra_op_threads),
      communication_(std::move(communication)),
      copies_(std::move(copies)) {}

Device::~Device() {
  if (copies_) copies_->synchronize();
  if (communication_) communication_->synchronize();
  stream_->synchronize();
}

graph::Status Device::supports(const graph::Node& node, const KernelRegistry& kernels,
                               std::optional<graph::DType> operand) const {
  const KernelDef* kernel = kernels.find(node.op, id_.kind);
  const std::string where = "node '" + node.name + "' (" + node.op + ") on " + id_.to_string();
  if (kernel == nullptr) {
    return graph::unimplemented(where + ": no " + std::string(graph::device_kind_name(id_.kind)) + " kernel for op '" +
                                node.op + "'");
  }
  const graph::DType dtype = !node.outputs.empty() ? node.outputs[0].dtype : graph::DType::f32;
  if (!kernel->accepts(dtype)) {
    return graph::unimplemented(where + ": the " + std::string(graph::device_kind_name(id_.kind)) + " kernel of '" +
                                node.op + "' does not take " + std::string(graph::dtype_name(dtype)));
  }
  if (operand && !kernel->accepts_operand(*operand)) {
    return graph::unimplemented(where + ": the " + std::string(graph::device_kind_name(id_.kind)) + " kernel of '" +
                                node.op + "' does not take " + std::string(graph::dtype_name(*operand)) + " operands");
  }
  return graph::Status();
}

const std::shared_ptr<Allocator>& Device::host_memory_allocator() const {
  static const std::shared_ptr<Allocator> host = host_allocator();
  return host;
}

namespace {

// Copies `from` into a new tensor from `allocator`, as work on `stream` that may touch both memory
// spaces (what a device's copy engine does), and waits for it.
Tensor copy_on_stream(const Tensor& from, const std::shared_ptr<Allocator>& allocator, Stream& stream,
                      const MemorySpace& device_space) {
  Tensor to;
  stream.enqueue([&] {
    ScopedMemoryAccess access(device_space, /*host_too=*/true);
    to = Tensor::empty(allocator, from.dtype(), from.shape());
    if (from.byte_size() > 0) std::memcpy(to.mutable_raw_data(), from.raw_data(), from.byte_size());
  });
  stream.synchronize();
  return to;
}

}  // namespace

Tensor Device::copy_to_host(const Tensor& tensor) const {
  return copy_on_stream(tensor, host_allocator(), *stream_, memory_space());
}

Tensor Device::copy_from_host(const Tensor& tensor) const {
  return copy_on_stream(tensor, allocator_, *stream_, memory_space());
}

Device::Staged Device::stage_from_host(const Tensor& tensor) const {
  if (!copies_) return {copy_from_host(tensor), nullptr};
  Tensor to = Tensor::empty(allocator_, tensor.dtype(), tensor.shape());
  // After the compute work queued before the allocation, which may still use the block. While a step
  // is recorded there is none (the recording began with the streams idle, and the blocks its work
  // frees are held), and waiting for a recorded point would join the copy into the recording.
  if (!stream_->recording()) copies_->wait(stream_->record());
  copies_->enqueue([from = tensor, to, space = memory_space()]() mutable {
    ScopedMemoryAccess access(space, /*host_too=*/true);
    if (from.byte_size() > 0) std::memcpy(to.mutable_raw_data(), from.raw_data(), from.byte_size());
  });
  return {std::move(to), copies_->record()};
}

graph::Status Device::enqueue_copy(const Tensor& from, Tensor to) const {
  MIRRA_CHECK(from.byte_size() == to.byte_size(), "a copy between tensors of different sizes");
  stream_->enqueue([from, to, space = memory_space()]() mutable {
    ScopedMemoryAccess access(space, /*host_too=*/true);
    if (from.byte_size() > 0) std::memcpy(to.mutable_raw_data(), from.raw_data(), from.byte_size());
  });
  return graph::Status();
}

DeviceSet DeviceSet::create(const std::vector<DeviceId>& ids, int threads, std::shared_ptr<MemoryBudget> budget,
                            const GpuOptions& gpu_options) {
  MIRRA_CHECK(gpu_options.logical_gpus_per_gpu >= 1, "logical_gpus_per_gpu must be at least 1");
  DeviceSet set;
  const int per_device = std::max(1, threads / std::max(static_cast<int>(ids.size()), 1));
  for (const DeviceId& id : ids) {
    MIRRA_CHECK(set.find(id) == nullptr, "device listed twice: " + id.to_string());
    graph::Expected<std::unique_ptr<Device>> device =
        open_device({.id = id, .intra_op_threads = per_device, .budget = budget, .options = gpu_options});
    if (device.ok()) {
      set.devices_.push_back(std::move(*device));
    } else if (set.status_.ok()) {
      set.status_ = device.status();
    }
  }
  return set;
}

DeviceSet DeviceSet::cpu(int count, int threads, std::shared_ptr<MemoryBudget> budget) {
  std::vector<DeviceId> ids;
  for (int i = 0; i < count; ++i) ids.push_back({DeviceKind::cpu, i});
  return create(ids, threads, std::move(budget));
}

Device* DeviceSet::find(DeviceId id) const {
  for (const auto& device : devices_) {
    if (device->id() == id) return device.get();
  }
  return nullptr;
}

Device* DeviceSet::owner_of(const MemorySpace& space) const {
  if (space.host) return nullptr;
  for (const auto& device : devices_) {
    if (device->memory_space() == space) return device.get();
  }
  return nullptr;
}

}  // namespace mirra::runtime
