// CachingAllocator: size classes, free lists and statistics; host RAM as system memory; host_allocator().
#include "runtime/cpu/caching_allocator.h"

#include <bit>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MIRRA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MIRRA_ASAN 1
#endif
#ifdef MIRRA_ASAN
#include <sanitizer/asan_interface.h>
#define MIRRA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define MIRRA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define MIRRA_POISON(p, n) ((void)(p), (void)(n))
#define MIRRA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace mirra::runtime {

namespace {

class HostMemory final : public SystemMemory {
 public:
  // The nothrow new, because AddressSanitizer's throwing one aborts.
  void* allocate(size_t bytes) noexcept override {
    return ::operator new(bytes, std::align_val_t{kTensorAlignment}, std::nothrow);
  }
  void free(void* block, size_t) noexcept override { ::operator delete(block, std::align_val_t{kTensorAlignment}); }
};

}  // namespace

CachingAllocator::CachingAllocator(std::string name, std::shared_ptr<MemoryBudget> budget, MemorySpace space,
                                   std::shared_ptr<Stream> free_after, std::shared_ptr<SystemMemory> system)
    : name_(std::move(name)), budget_(std::move(budget)), space_(space), free_after_(std::move(free_after)),
      system_(system ? std::move(system) : std::make_shared<HostMemory>()) {}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kTensorAlignment) return kTensorAlignment;
  const size_t power = std::bit_ceil(bytes);
  const size_t three_quarters = power / 2 + power / 4;  // 1.5 * 2^(k-1)
  return bytes <= three_quarters ? three_quarters : power;
}

CachingAllocator::~CachingAllocator() { release_cache(); }

void* CachingAllocator::allocate(size_t bytes) {
  const Pool pool{size_class(bytes), ScopedAllocationStream::current()};
  const size_t size = pool.size;
  {
    std::lock_guard lock(mutex_);
    ++stats_.allocations;
    stats_.bytes_in_use += size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    auto it = free_blocks_.find(pool);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= size;
      ++stats_.cache_hits;
      if (pool.stream != nullptr) stream_of_.emplace(block, pool.stream);
      if (system_->host_addressable()) MIRRA_UNPOISON(block, size);
      return block;
    }
  }
  void* block = nullptr;
  try {
    block = allocate_from_system(size);
  } catch (const OutOfMemory&) {
    std::lock_guard lock(mutex_);
    --stats_.allocations;
    stats_.bytes_in_use -= size;
    throw;
  }
  if (pool.stream != nullptr) {
    std::lock_guard lock(mutex_);
    stream_of_.emplace(block, pool.stream);
  }
  return block;
}

void* CachingAllocator::allocate_from_system(size_t size) {
  // Out of memory (or budget) with blocks cached: give them back and try once more, the cache may hold
  // enough in other size classes. Not while a step is being captured (a hold collects): returning
  // device memory then is illegal on a GPU (cudaFree during a capture), and a device-wide
  // synchronisation otherwise; the capture fails instead and the step runs uncaptured.
  const auto bytes = static_cast<int64_t>(size);
  const auto try_once = [&]() -> void* {
    if (budget_ && !budget_->reserve(bytes)) return nullptr;
    void* block = system_->allocate(size);
    if (block == nullptr && budget_) budget_->release(bytes);
    return block;
  };
  void* block = try_once();
  bool capturing = false;
  if (block == nullptr) {
    {
      std::lock_guard lock(mutex_);
      capturing = !collecting_.empty();
    }
    if (!capturing) {
      release_cache();
      block = try_once();
    }
  }
  if (block != nullptr) {
    std::lock_guard lock(mutex_);
    ++stats_.system_allocations;
    return block;
  }
  const std::string unreleased = capturing ? ", its cache kept while a step is being captured" : "";
  if (budget_ && budget_->reserved() + bytes > budget_->limit()) {
    throw OutOfMemory(name_ + ": " + format_bytes(bytes) + " more would pass the memory limit of " +
                      format_bytes(budget_->limit()) + " (" + format_bytes(budget_->reserved()) + " held" + unreleased + ")");
  }
  const AllocatorStats now = stats();  // this request is counted in use already
  const auto held = static_cast<int64_t>(now.bytes_in_use + now.bytes_cached) - bytes;
  throw OutOfMemory(name_ + ": the system refused " + format_bytes(bytes) + " (" + format_bytes(held) + " held" +
                    unreleased + ")");
}

class CachingAllocator::Hold final : public FreedBlockHold {
 public:
  explicit Hold(std::shared_ptr<CachingAllocator> allocator) : allocator_(std::move(allocator)) {}
  ~Hold() override {
    stop_collecting();
    for (const auto& [data, pool] : blocks_) allocator_->release(data, pool);
  }

  void stop_collecting() override {
    std::lock_guard lock(allocator_->mutex_);
    std::erase(allocator_->collecting_, this);
  }
  // Under the allocator's mutex.
  void collect(void* data, Pool pool) { blocks_.emplace_back(data, pool); }

 private:
  std::shared_ptr<CachingAllocator> allocator_;
  std::vector<std::pair<void*, Pool>> blocks_;
};

std::unique_ptr<FreedBlockHold> CachingAllocator::hold_freed_blocks() {
  auto hold = std::make_unique<Hold>(shared_from_this());
  std::lock_guard lock(mutex_);
  collecting_.push_back(hold.get());
  return hold;
}

void CachingAllocator::deallocate(void* data, size_t bytes) {
  Pool pool{size_class(bytes), nullptr};
  {
    std::lock_guard lock(mutex_);
    if (!stream_of_.empty()) {
      if (auto it = stream_of_.find(data); it != stream_of_.end()) {
        pool.stream = it->second;
        stream_of_.erase(it);
      }
    }
    if (!collecting_.empty()) {
      collecting_.back()->collect(data, pool);
      return;
    }
  }
  release(data, pool);
}

void CachingAllocator::release(void* data, Pool pool) {
  if (free_after_) {
    // Work enqueued before this free may still use the block; it may be handed out again only
    // after that work ran. The queued return keeps the allocator alive.
    free_after_->enqueue([self = shared_from_this(), data, pool] { self->return_to_cache(data, pool); });
    return;
  }
  return_to_cache(data, pool);
}

void CachingAllocator::return_to_cache(void* data, Pool pool) {
  if (system_->host_addressable()) MIRRA_POISON(data, pool.size);
  std::lock_guard lock(mutex_);
  stats_.bytes_in_use -= pool.size;
  stats_.bytes_cached += pool.size;
  free_blocks_[pool].push_back(data);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::release_cache() {
  std::lock_guard lock(mutex_);
  for (auto& [pool, blocks] : free_blocks_) {
    for (void* block : blocks) {
      if (system_->host_addressable()) MIRRA_UNPOISON(block, pool.size);
      system_->free(block, pool.size);
    }
    if (budget_) budget_->release(static_cast<int64_t>(pool.size * blocks.size()));
  }
  free_blocks_.clear();
  stats_.bytes_cached = 0;
}

std::shared_ptr<Allocator> host_allocator() {
  static const std::shared_ptr<Allocator> allocator = std::make_shared<CachingAllocator>("host");
  return allocator;
}

}  // namespace mirra::runtime
