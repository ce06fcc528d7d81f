// Device and DeviceSet: a device is where kernels run and tensors live: an allocator for its memory
// space, a compute stream, a communication stream (collectives beside the compute stream; the
// compute stream itself on a device without streams), and the threads one kernel may use. Each kind
// opens its devices as its registration says (runtime/device_kinds.h); the built-in kinds:
//   - cpu:<i>, logical CPU devices: host memory, an inline stream (work runs on the executor's
//     thread); replicas of a strategy on one machine.
//   - cpu_async:<i>: the same CPU kernels, but run in order on a stream thread of its own, in a
//     memory space of its own (host RAM that host code may not touch, runtime/memory_space.h), with
//     stream-ordered freeing. It behaves as a GPU does, so the mistakes a GPU punishes (a missing
//     copy, host code reading device memory, a buffer freed while queued work still uses it) fail
//     in CI, which has no GPU.
//   - gpu:<i> (runtime/cuda/gpu_device.h), in a build with CUDA.
//
//   DeviceSet devices = DeviceSet::create({{DeviceKind::cpu, 0}, {DeviceKind::cpu_async, 0}}, threads);
//   Tensor on_host = devices.find({DeviceKind::cpu_async, 0})->copy_to_host(value);
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "graph/device_id.h"
#include "graph/node.h"
#include "runtime/allocator.h"
#include "runtime/gpu_devices.h"
#include "runtime/memory_budget.h"
#include "runtime/stream.h"
#include "runtime/tensor.h"

namespace mirra::runtime {

using graph::DeviceId;
using graph::DeviceKind;

class KernelRegistry;

class Device {
 public:
  // `communication`: the communication stream, when not the compute stream; `copies`: where feeds
  // staged ahead are copied in (stage_from_host), when they are not copied at once.
  Device(DeviceId id, std::shared_ptr<Allocator> allocator, std::shared_ptr<Stream> stream, int intra_op_threads = 1,
         std::shared_ptr<Stream> communication = nullptr, std::shared_ptr<Stream> copies = nullptr);
  // Finishes the work on its streams first.
  virtual ~Device();

  DeviceId id() const { return id_; }
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }
  MemorySpace memory_space() const { return allocator_->memory_space(); }
  // Threads one kernel may use inside itself (oneDNN's OpenMP team): the session's threads shared
  // equally among its logical devices, so replicas running side by side do not oversubscribe cores.
  int intra_op_threads() const { return intra_op_threads_; }

  // Where its kernels' host-memory outputs live (a GPU's are pinned, so copies into them run
  // asynchronously).
  virtual const std::shared_ptr<Allocator>& host_memory_allocator() const;

  // Where the device's kernels run, in order.
  Stream& compute_stream() const { return *stream_; }
  // Where its collectives' own work runs (a GPU's NCCL calls, the return of sums staged through the
  // host), so that the compute stream goes on meanwhile. Work there waits for the compute stream's
  // work it reads, and allocates for its own stream (ScopedAllocationStream, runtime/allocator.h).
  Stream& communication_stream() const { return communication_ ? *communication_ : *stream_; }
  // True when its work runs on a stream thread of its own (kernels complete after enqueueing).
  bool asynchronous() const { return stream_->asynchronous(); }

  // Ok when `kernels` has a kernel for the node's op on this device's kind that accepts its dtype
  // and the dtype of its first input (`operand`, when it has inputs); otherwise unimplemented, naming
  // node, op and device.
  graph::Status supports(const graph::Node& node, const KernelRegistry& kernels,
                         std::optional<graph::DType> operand = std::nullopt) const;

  // `tensor` (in this device's memory or the host's) copied into host memory, after the work
  // enqueued so far; the caller waits for it.
  virtual Tensor copy_to_host(const Tensor& tensor) const;
  // `tensor` (in host memory) copied into this device's memory; the caller waits for it.
  virtual Tensor copy_from_host(const Tensor& tensor) const;
  // A host tensor on its way into this device's memory, for work enqueued later: `tensor` holds the
  // value once `ready` completes (no event: at once). A device with a copy stream (a GPU, a cpu_async
  // device) copies there, after what its compute stream has queued, so the copy overlaps whatever the
  // compute stream runs meanwhile; other devices copy at once. Every stream that reads `tensor` must
  // wait for `ready` first.
  struct Staged {
    Tensor tensor;
    std::shared_ptr<Event> ready;
  };
  virtual Staged stage_from_host(const Tensor& tensor) const;
  // Copies `from` into `to`'s buffer (the same size; each in this device's memory or the host's) on
  // the compute stream, after the work enqueued there so far; an error when the launch failed. The
  // caller keeps both alive until the stream has run it.
  virtual graph::Status enqueue_copy(const Tensor& from, Tensor to) const;

 private:
  DeviceId id_;
  std::shared_ptr<Allocator> allocator_;
  std::shared_ptr<Stream> stream_;  // shared with its allocator, which frees in stream order
  int intra_op_threads_;
  std::shared_ptr<Stream> communication_;  // null: the compute stream
  std::shared_ptr<Stream> copies_;         // null: feeds are copied at once
};

class DeviceSet {
 public:
  // One device per id, sharing `threads` threads and, when given, one memory budget (they share the
  // host's memory; a GPU's own memory is not counted). Logical devices of one physical GPU (or
  // cpu_async device) share its memory space (`gpu_options.logical_gpus_per_gpu`). A device that
  // cannot be opened (a GPU in a build without CUDA, a kind the runtime does not know) is left out,
  // and status() says why.
  static DeviceSet create(const std::vector<DeviceId>& ids, int threads = 1,
                          std::shared_ptr<MemoryBudget> budget = nullptr, const GpuOptions& gpu_options = {});
  // `count` logical CPU devices cpu:0 .. cpu:count-1.
  static DeviceSet cpu(int count, int threads = 1, std::shared_ptr<MemoryBudget> budget = nullptr);

  Device* find(DeviceId id) const;
  // A device whose memory `space` is, the first of the logical devices sharing it (null for host memory).
  Device* owner_of(const MemorySpace& space) const;
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  // Ok, or why a device asked for could not be opened (unavailable).
  const graph::Status& status() const { return status_; }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  graph::Status status_;
};

}  // namespace mirra::runtime
