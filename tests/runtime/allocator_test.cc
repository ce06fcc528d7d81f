// CachingAllocator and Tensor buffers: alignment, size classes, reuse, statistics, holds on freed
// blocks (and the cache kept when out of memory under one), and buffers that outlive their session.
#include <doctest/doctest.h>

#include <cstdint>
#include <new>

#include "runtime/cpu/caching_allocator.h"
#include "runtime/memory_budget.h"
#include "runtime/tensor.h"

namespace mirra::runtime {
namespace {

TEST_CASE("CachingAllocator.size_classes_waste_at_most_a_third") {
  CHECK(CachingAllocator::size_class(0) == 64);
  CHECK(CachingAllocator::size_class(64) == 64);
  CHECK(CachingAllocator::size_class(65) == 96);
  CHECK(CachingAllocator::size_class(97) == 128);
  CHECK(CachingAllocator::size_class(1000) == 1024);
  CHECK(CachingAllocator::size_class(1025) == 1536);
  for (size_t bytes = 65; bytes < 1'000'000; bytes = bytes * 5 / 4 + 1) {
    const size_t size = CachingAllocator::size_class(bytes);
    CHECK(size >= bytes);
    CHECK(2 * size <= 3 * bytes);  // waste = size - bytes <= size / 3
  }
}

TEST_CASE("CachingAllocator.reuses_freed_blocks_and_aligns_them") {
  auto allocator = std::make_shared<CachingAllocator>("test");
  void* first = allocator->allocate(1000);
  CHECK(reinterpret_cast<uintptr_t>(first) % kTensorAlignment == 0);
  allocator->deallocate(first, 1000);
  void* second = allocator->allocate(900);  // same size class
  CHECK(second == first);
  const AllocatorStats stats = allocator->stats();
  CHECK(stats.allocations == 2);
  CHECK(stats.cache_hits == 1);
  CHECK(stats.bytes_in_use == 1024);
  allocator->deallocate(second, 900);
  CHECK(allocator->stats().bytes_cached == 1024);
  allocator->release_cache();
  CHECK(allocator->stats().bytes_cached == 0);
}

// System memory that counts what it hands out and refuses past a limit (as cudaMalloc does when the
// device is full).
class CountingMemory final : public SystemMemory {
 public:
  explicit CountingMemory(size_t limit) : limit_(limit) {}
  void* allocate(size_t bytes) noexcept override {
    if (held_ + bytes > limit_) return nullptr;
    held_ += bytes;
    ++allocations_;
    return ::operator new(bytes, std::align_val_t{kTensorAlignment}, std::nothrow);
  }
  void free(void* block, size_t bytes) noexcept override {
    held_ -= bytes;
    ::operator delete(block, std::align_val_t{kTensorAlignment});
  }
  bool host_addressable() const override { return false; }  // as a GPU's: never poisoned
  size_t held_ = 0, allocations_ = 0;

 private:
  size_t limit_;
};

TEST_CASE("CachingAllocator.takes_blocks_from_its_system_memory_and_counts_them") {
  auto memory = std::make_shared<CountingMemory>(4096);
  auto allocator = std::make_shared<CachingAllocator>("device", nullptr, MemorySpace::host_memory(), nullptr, memory);
  void* block = allocator->allocate(1000);
  CHECK(memory->allocations_ == 1);
  allocator->deallocate(block, 1000);
  CHECK(allocator->allocate(1000) == block);  // from the cache: the system is not asked again
  CHECK(memory->allocations_ == 1);
  CHECK(allocator->stats().system_allocations == 1);
  // Full: the cached blocks go back and the request is retried once; then it fails naming the allocator.
  void* second = allocator->allocate(2000);
  CHECK(memory->held_ == 1024 + 2048);
  CHECK_THROWS_WITH_AS(allocator->allocate(2000), doctest::Contains("device: the system refused 2.0 KiB"), OutOfMemory);
  allocator->deallocate(second, 2000);
  allocator->deallocate(block, 1000);
  allocator->release_cache();
  CHECK(memory->held_ == 0);
}

// Page-locked system memory (a GPU's pinned host memory), as a copy to the device asks its tensor's
// buffer.
class PageLockedMemory final : public SystemMemory {
 public:
  void* allocate(size_t bytes) noexcept override {
    return ::operator new(bytes, std::align_val_t{kTensorAlignment}, std::nothrow);
  }
  void free(void* block, size_t) noexcept override { ::operator delete(block, std::align_val_t{kTensorAlignment}); }
  bool page_locked() const override { return true; }
};

TEST_CASE("CachingAllocator.says_whether_its_blocks_are_page_locked") {
  auto pinned = std::make_shared<CachingAllocator>("pinned host", nullptr, MemorySpace::host_memory(), nullptr,
                                                   std::make_shared<PageLockedMemory>());
  const Tensor staged = Tensor::empty(pinned, graph::DType::f32, TensorShape{4});
  CHECK(staged.buffer()->page_locked());
  CHECK_FALSE(Tensor::empty(host_allocator(), graph::DType::f32, TensorShape{4}).buffer()->page_locked());
  CHECK_FALSE(Tensor::empty(std::make_shared<CachingAllocator>("device", nullptr, MemorySpace::host_memory(), nullptr,
                                                               std::make_shared<CountingMemory>(4096)),
                            graph::DType::f32, TensorShape{4})
                  .buffer()
                  ->page_locked());
}

// What is freed while a hold collects (a recorded step's buffers) is handed out again only once the
// hold ends; what is freed after it stopped collecting goes back to the cache at once.
TEST_CASE("CachingAllocator.a_hold_keeps_freed_blocks_from_reuse_until_it_ends") {
  auto allocator = std::make_shared<CachingAllocator>("test");
  void* recorded = allocator->allocate(256);
  std::unique_ptr<FreedBlockHold> hold = allocator->hold_freed_blocks();
  REQUIRE(hold != nullptr);
  allocator->deallocate(recorded, 256);
  void* other = allocator->allocate(256);
  CHECK(other != recorded);
  hold->stop_collecting();
  allocator->deallocate(other, 256);
  CHECK(allocator->allocate(256) == other);
  CHECK(allocator->stats().bytes_cached == 0);
  hold.reset();
  CHECK(allocator->stats().bytes_cached == 256);
  CHECK(allocator->allocate(256) == recorded);
  allocator->deallocate(recorded, 256);
  allocator->deallocate(other, 256);
}

// Out of memory with blocks cached, the allocator gives them back and tries again, but not while a
// hold collects (a step being captured: cudaFree is illegal then), whose allocation fails instead.
TEST_CASE("CachingAllocator.keeps_its_cache_when_out_of_memory_while_a_step_is_captured") {
  auto allocator = std::make_shared<CachingAllocator>("test", std::make_shared<MemoryBudget>(4096));
  allocator->deallocate(allocator->allocate(4096), 4096);  // the whole budget, cached
  {
    std::unique_ptr<FreedBlockHold> hold = allocator->hold_freed_blocks();
    CHECK_THROWS_WITH_AS(allocator->allocate(1024),
                         "test: 1.0 KiB more would pass the memory limit of 4.0 KiB (4.0 KiB held, its cache kept while "
                         "a step is being captured)",
                         OutOfMemory);
    CHECK(allocator->stats().bytes_cached == 4096);
  }
  void* block = allocator->allocate(1024);  // no capture: the cache goes back, and this fits
  CHECK(allocator->stats().bytes_cached == 0);
  allocator->deallocate(block, 1024);
}

TEST_CASE("Tensor.buffers_are_shared_and_keep_their_allocator_alive") {
  Tensor kept;
  {
    auto allocator = std::make_shared<CachingAllocator>("short-lived");
    kept = Tensor::empty(allocator, graph::DType::f32, {2, 3});
    kept.mutable_data<float>()[5] = 4.0f;
  }
  Tensor copy = kept;
  CHECK(copy.data<float>() == kept.data<float>());
  CHECK(copy.data<float>()[5] == 4.0f);
  CHECK(kept.reshaped({3, 2}).type_string() == "f32[3,2]");
  CHECK(Tensor::scalar<int64_t>(7).to_vector<int64_t>() == std::vector<int64_t>{7});
}

}  // namespace
}  // namespace mirra::runtime
