// CachingAllocator and Tensor buffers: alignment, size classes, reuse, statistics, and buffers that
// outlive their session.
#include <doctest/doctest.h>

#include <cstdint>

#include "runtime/cpu/caching_allocator.h"
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
