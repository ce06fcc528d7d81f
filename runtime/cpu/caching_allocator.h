// CachingAllocator: an allocator that keeps freed blocks in size classes and hands them out again, so
// a training loop stops calling the system allocator (or cudaMalloc) after its first step. Size classes are
// 2^k and 1.5 * 2^k bytes (at least 64), so a block wastes at most a third of itself. For a device
// with a stream of its own, freeing is stream-ordered: a freed block returns to the cache only once
// the work enqueued on the stream before the free has run. A freed block is handed again only to
// allocations for the stream it was allocated for (ScopedAllocationStream, runtime/allocator.h): work
// on another stream is not ordered after the work that last used it. A hold (hold_freed_blocks) keeps what is
// freed meanwhile out of the cache until it ends. Under AddressSanitizer cached blocks are poisoned,
// so any use of a block after it was returned is reported.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/memory_budget.h"
#include "runtime/stream.h"

namespace mirra::runtime {

// Where a caching allocator's blocks come from and go back to: host RAM unless given (a GPU's
// memory comes from cudaMalloc).
class SystemMemory {
 public:
  virtual ~SystemMemory() = default;
  // A block of `bytes` bytes aligned to kTensorAlignment, or null when refused.
  virtual void* allocate(size_t bytes) noexcept = 0;
  virtual void free(void* block, size_t bytes) noexcept = 0;
  // Whether the host can address the blocks (then cached blocks are poisoned under ASan).
  virtual bool host_addressable() const { return true; }
  // Whether the blocks are page-locked host memory (Allocator::page_locked).
  virtual bool page_locked() const { return false; }
};

class CachingAllocator final : public Allocator, public std::enable_shared_from_this<CachingAllocator> {
 public:
  // With a budget, the blocks held from the system (in use and cached) count against it. The blocks
  // come from `system` (host RAM when null) and are tagged with `space` (a cpu_async device's memory
  // is host RAM that host code may not touch). With `free_after`, blocks are freed in that stream's
  // order (a GPU's allocator needs none: its kernels run in the order they allocate and free).
  explicit CachingAllocator(std::string name, std::shared_ptr<MemoryBudget> budget = nullptr,
                            MemorySpace space = MemorySpace::host_memory(), std::shared_ptr<Stream> free_after = nullptr,
                            std::shared_ptr<SystemMemory> system = nullptr);
  ~CachingAllocator() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* data, size_t bytes) override;
  AllocatorStats stats() const override;
  std::string name() const override { return name_; }
  MemorySpace memory_space() const override { return space_; }
  bool page_locked() const override { return system_ != nullptr && system_->page_locked(); }
  // Holds may nest: a block freed goes to the newest one still collecting.
  std::unique_ptr<FreedBlockHold> hold_freed_blocks() override;

  // Returns every cached block to the system.
  void release_cache();
  static size_t size_class(size_t bytes);

 private:
  // A new block from the system, after the budget allows it; OutOfMemory when either refuses.
  void* allocate_from_system(size_t size);
  // A block's place in the cache: its size class, and the stream it is for (null: the compute stream).
  struct Pool {
    size_t size = 0;
    const void* stream = nullptr;
    friend bool operator==(const Pool&, const Pool&) = default;
  };
  struct PoolHash {
    size_t operator()(const Pool& pool) const { return pool.size ^ std::hash<const void*>()(pool.stream) * 31; }
  };

  void return_to_cache(void* data, Pool pool);
  // Back to the cache, in the stream's order when the allocator has one.
  void release(void* data, Pool pool);

  class Hold;

  std::string name_;
  std::shared_ptr<MemoryBudget> budget_;
  MemorySpace space_;
  std::shared_ptr<Stream> free_after_;
  std::shared_ptr<SystemMemory> system_;
  mutable std::mutex mutex_;
  std::unordered_map<Pool, std::vector<void*>, PoolHash> free_blocks_;
  std::unordered_map<void*, const void*> stream_of_;  // blocks in use that are for another stream than the compute one
  std::vector<Hold*> collecting_;                                // holds still collecting, newest last
  AllocatorStats stats_;
};

}  // namespace mirra::runtime
