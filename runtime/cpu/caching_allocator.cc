// CachingAllocator: size classes, free lists and statistics; host_allocator().
#include "runtime/cpu/caching_allocator.h"

#include <bit>
#include <new>

namespace mirra::runtime {

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kTensorAlignment) return kTensorAlignment;
  const size_t power = std::bit_ceil(bytes);
  const size_t three_quarters = power / 2 + power / 4;  // 1.5 * 2^(k-1)
  return bytes <= three_quarters ? three_quarters : power;
}

CachingAllocator::~CachingAllocator() { release_cache(); }

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    stats_.bytes_in_use += size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= size;
      ++stats_.cache_hits;
      return block;
    }
  }
  // Out of memory with blocks cached: give them back to the system and try once more (the cache may
  // hold enough in other size classes). Still out: undo the count and throw bad_alloc. (The nothrow
  // form, because AddressSanitizer's throwing operator new aborts instead of throwing.)
  void* block = ::operator new(size, std::align_val_t{kTensorAlignment}, std::nothrow);
  if (block == nullptr) {
    release_cache();
    block = ::operator new(size, std::align_val_t{kTensorAlignment}, std::nothrow);
  }
  if (block == nullptr) {
    std::lock_guard lock(mutex_);
    --stats_.allocations;
    stats_.bytes_in_use -= size;
    throw std::bad_alloc();
  }
  return block;
}

void CachingAllocator::deallocate(void* data, size_t bytes) {
  const size_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
  free_blocks_[size].push_back(data);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::release_cache() {
  std::lock_guard lock(mutex_);
  for (auto& [size, blocks] : free_blocks_) {
    for (void* block : blocks) ::operator delete(block, std::align_val_t{kTensorAlignment});
  }
  free_blocks_.clear();
  stats_.bytes_cached = 0;
}

std::shared_ptr<Allocator> host_allocator() {
  static const std::shared_ptr<Allocator> allocator = std::make_shared<CachingAllocator>("host");
  return allocator;
}

}  // namespace mirra::runtime
