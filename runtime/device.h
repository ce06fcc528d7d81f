// Device and DeviceSet: a device is where kernels run and tensors live, with its own allocator.
// One process may hold several logical CPU devices (cpu:0, cpu:1, ...), each with its own caching
// allocator, so that strategies can treat them as replicas.
#pragma once

#include <memory>
#include <vector>

#include "graph/device_id.h"
#include "runtime/allocator.h"
#include "runtime/memory_budget.h"

namespace mirra::runtime {

using graph::DeviceId;
using graph::DeviceKind;

class Device {
 public:
  Device(DeviceId id, std::shared_ptr<Allocator> allocator, int intra_op_threads = 1)
      : id_(id), allocator_(std::move(allocator)), intra_op_threads_(intra_op_threads) {}

  DeviceId id() const { return id_; }
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }
  // Threads one kernel may use inside itself (oneDNN's OpenMP team): the session's threads shared
  // equally among its logical devices, so replicas running side by side do not oversubscribe cores.
  int intra_op_threads() const { return intra_op_threads_; }

 private:
  DeviceId id_;
  std::shared_ptr<Allocator> allocator_;
  int intra_op_threads_;
};

class DeviceSet {
 public:
  // `count` logical CPU devices cpu:0 .. cpu:count-1, sharing `threads` threads and, when given, one
  // memory budget (they share the host's memory).
  static DeviceSet cpu(int count, int threads = 1, std::shared_ptr<MemoryBudget> budget = nullptr);

  Device* find(DeviceId id) const;
  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace mirra::runtime
