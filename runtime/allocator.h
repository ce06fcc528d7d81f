// Allocator: where a device's tensor memory comes from. Every block is 64-byte aligned. Buffers keep
// their allocator alive (shared_ptr), so a tensor may outlive the session that made it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/memory_space.h"

namespace mirra::runtime {

inline constexpr size_t kTensorAlignment = 64;

struct AllocatorStats {
  size_t bytes_in_use = 0;
  size_t peak_bytes_in_use = 0;
  size_t bytes_cached = 0;  // freed blocks kept for reuse
  size_t allocations = 0;   // requests served
  size_t cache_hits = 0;    // requests served from the cache
  size_t system_allocations = 0;  // blocks taken from the system (operator new, cudaMalloc)
};

// Keeps the blocks freed while it collects from being handed out again until it is destroyed, then
// frees them as usual: a captured step's buffers, which each replay uses again (Note [Captured steps]
// in runtime/executor.h).
class FreedBlockHold {
 public:
  virtual ~FreedBlockHold() = default;
  // Blocks freed from now on are freed as usual; those collected stay held.
  virtual void stop_collecting() = 0;
};

// The stream the allocations of this thread are for while it lives (null: the device's compute
// stream), as PyTorch's caching allocator allocates for the current stream. A caching allocator hands
// a freed block again only to allocations for the stream it was allocated for: a GPU kernel frees its
// scratch as soon as it has launched, and only the next work of its own stream is ordered after that
// launch. The executor sets it while a kernel runs on its device's communication stream.
class ScopedAllocationStream {
 public:
  // Any address that names the stream (the Stream itself).
  explicit ScopedAllocationStream(const void* stream) : outer_(current_) { current_ = stream; }
  ~ScopedAllocationStream() { current_ = outer_; }
  ScopedAllocationStream(const ScopedAllocationStream&) = delete;
  ScopedAllocationStream& operator=(const ScopedAllocationStream&) = delete;
  static const void* current() { return current_; }

 private:
  static inline thread_local const void* current_ = nullptr;
  const void* outer_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // A 64-byte aligned block of at least `bytes` bytes (non-null, also for 0 bytes).
  virtual void* allocate(size_t bytes) = 0;
  // Returns a block from allocate() with the same `bytes`.
  virtual void deallocate(void* data, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual std::string name() const = 0;
  // Where its blocks live.
  virtual MemorySpace memory_space() const { return MemorySpace::host_memory(); }
  // Whether its blocks are page-locked host memory, which a GPU copies to and from asynchronously.
  virtual bool page_locked() const { return false; }
  // A hold collecting the blocks freed from now on; null for an allocator that hands no freed block
  // out again (it returns them to the system).
  virtual std::unique_ptr<FreedBlockHold> hold_freed_blocks() { return nullptr; }
};

// The process-wide allocator for host tensors that belong to no device (feeds built by users).
std::shared_ptr<Allocator> host_allocator();

}  // namespace mirra::runtime
