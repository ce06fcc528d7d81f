// Memory spaces: where a buffer lives, and who may touch it. Host memory is the process's; a device
// with a stream of its own (cpu_async, later a GPU) has a memory space of its own that only work
// running on that device's stream may read or write, while work on a stream touches host memory
// only when it says so (a copy, a kernel with host-memory arguments). Every Tensor access checks
// this (ScopedMemoryAccess says what the current thread may touch), so a kernel that reads device
// memory from the host fails with MemorySpaceError, which the executor reports for its node: the
// mistakes a GPU would punish with a crash or garbage show up as errors on the CPU.
#pragma once

#include <compare>
#include <stdexcept>
#include <string>
#include <utility>

#include "graph/device_id.h"

namespace mirra::runtime {

struct MemorySpace {
  bool host = true;
  graph::DeviceId device;  // the owner of device memory; meaningless for host memory

  static MemorySpace host_memory() { return {}; }
  static MemorySpace of_device(graph::DeviceId id) { return {false, id}; }
  // "host memory", "cpu_async:0 memory"
  std::string to_string() const;
  friend bool operator==(const MemorySpace& a, const MemorySpace& b) {
    return a.host == b.host && (a.host || a.device == b.device);
  }
};

// Touching memory the current thread may not touch.
class MemorySpaceError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// What a thread may touch: a device's memory (none for host code) and whether host memory too.
struct MemoryAccess {
  const MemorySpace* device_space = nullptr;
  bool host_too = true;
};

// While alive, the current thread runs work of the device owning `space` (a stream's worker), and
// may touch host memory too when `host_too` (copies, host-memory arguments). Nests.
class ScopedMemoryAccess {
 public:
  ScopedMemoryAccess(const MemorySpace& space, bool host_too) : ScopedMemoryAccess(MemoryAccess{&space, host_too}) {}
  ScopedMemoryAccess(MemorySpace&& space, bool host_too) = delete;  // it would outlive the temporary
  // `access.device_space` must outlive this scope.
  explicit ScopedMemoryAccess(const MemoryAccess& access);
  ~ScopedMemoryAccess();
  ScopedMemoryAccess(const ScopedMemoryAccess&) = delete;
  ScopedMemoryAccess& operator=(const ScopedMemoryAccess&) = delete;

 private:
  const MemorySpace* previous_space_;
  bool previous_host_;
};

namespace detail {
// What the current thread may touch: no device space means host code (host memory only).
inline thread_local const MemorySpace* t_device_space = nullptr;
inline thread_local bool t_host_too = true;
}  // namespace detail

inline MemoryAccess current_memory_access() { return {detail::t_device_space, detail::t_host_too}; }

// `body`, made to run with the calling thread's MemoryAccess on whichever thread runs it: a parallel
// loop inside a device's work hands its tasks to other oneTBB threads, which work for that device too.
template <class Body>
auto with_memory_access_of_caller(Body body) {
  return [access = current_memory_access(), body = std::move(body)](auto&&... args) {
    ScopedMemoryAccess scope(access);
    return body(std::forward<decltype(args)>(args)...);
  };
}

// Whether the current thread may touch memory in `space`: host code (no ScopedMemoryAccess) touches
// host memory only; a stream's work touches its device's memory, and host memory when allowed.
// Inline: every Tensor access asks.
inline bool may_touch(const MemorySpace& space) {
  if (space.host) return detail::t_host_too;
  return detail::t_device_space != nullptr && *detail::t_device_space == space;
}

}  // namespace mirra::runtime
