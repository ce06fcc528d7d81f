// CachingAllocator: a CPU allocator that keeps freed blocks in size classes and hands them out again,
// so a training loop stops calling the system allocator after its first step. Size classes are
// 2^k and 1.5 * 2^k bytes (at least 64), so a block wastes at most a third of itself.
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/allocator.h"

namespace mirra::runtime {

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(std::string name) : name_(std::move(name)) {}
  ~CachingAllocator() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* data, size_t bytes) override;
  AllocatorStats stats() const override;
  std::string name() const override { return name_; }

  // Returns every cached block to the system.
  void release_cache();
  static size_t size_class(size_t bytes);

 private:
  std::string name_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // by size class
  AllocatorStats stats_;
};

}  // namespace mirra::runtime
