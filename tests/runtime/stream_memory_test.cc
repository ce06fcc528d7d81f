// Memory and streams: a block is handed out again only to allocations for the stream it was
// allocated for. A GPU kernel frees its scratch (a cuDNN workspace, a permuted filter) as soon as it
// has launched, while its work is still queued on the compute stream; a kernel on the communication
// stream that received that block would write it while the compute stream may still use it, with
// nothing ordering the two. cpu_async kernels finish their work before they free, so there the reuse
// would be harmless, but it is the same reuse: these tests assert that it never happens, in the
// allocator and through a session on cpu_async devices (the GPU's model).
#include <doctest/doctest.h>

#include <mutex>
#include <set>
#include <vector>

#include "ops/ops.h"
#include "ops/registry.h"
#include "runtime/cpu/caching_allocator.h"
#include "runtime/session.h"

namespace mirra::runtime {
namespace {

using graph::DeviceKind;
using graph::DType;

TEST_CASE("CachingAllocator.hands_a_block_again_only_to_the_stream_it_was_allocated_for") {
  auto allocator = std::make_shared<CachingAllocator>("blocks");
  const int communication = 0;  // any address names a stream
  const size_t bytes = 4096;
  void* compute_block = allocator->allocate(bytes);
  void* communication_block = nullptr;
  {
    ScopedAllocationStream on(&communication);
    communication_block = allocator->allocate(bytes);
  }
  allocator->deallocate(compute_block, bytes);
  allocator->deallocate(communication_block, bytes);  // freed outside the scope: still that stream's
  {
    ScopedAllocationStream on(&communication);
    void* again = allocator->allocate(bytes);
    CHECK(again == communication_block);
    void* second = allocator->allocate(bytes);  // the stream's cache is empty: a new block
    CHECK(second != compute_block);
    CHECK(second != communication_block);
    allocator->deallocate(again, bytes);
    allocator->deallocate(second, bytes);
  }
  void* compute_again = allocator->allocate(bytes);
  CHECK(compute_again == compute_block);
  allocator->deallocate(compute_again, bytes);
  const AllocatorStats stats = allocator->stats();
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.system_allocations == 3);
  CHECK(stats.cache_hits == 2);
  CHECK(stats.bytes_cached == 3 * CachingAllocator::size_class(bytes));
  allocator->release_cache();
  CHECK(allocator->stats().bytes_cached == 0);
}

// The addresses each kind of kernel was given.
struct Blocks {
  std::mutex mutex;
  std::set<const void*> compute_scratch, communication_outputs;
};
Blocks blocks;
constexpr int64_t kElements = 1024;

// Frees a scratch buffer as a GPU kernel frees its workspace; its output is its input.
Status frees_scratch(KernelContext& ctx) {
  Tensor scratch = Tensor::empty(ctx.device().allocator(), DType::f32, TensorShape{kElements});
  {
    std::lock_guard lock(blocks.mutex);
    blocks.compute_scratch.insert(scratch.raw_data());
  }
  ctx.set_output(0, ctx.input(0));
  return Status();
}

// A kernel on the communication stream with an output of the scratch's size.
Status allocates_on_communication(KernelContext& ctx) {
  Tensor& out = ctx.allocate_output(0, DType::f32, TensorShape{kElements});
  {
    std::lock_guard lock(blocks.mutex);
    blocks.communication_outputs.insert(out.raw_data());
  }
  std::fill_n(out.mutable_data<float>(), kElements, 1.0f);
  return Status();
}

struct Tables {
  graph::OpRegistry schemas;
  KernelRegistry kernels;
  Tables() {
    ops::register_builtin_ops(schemas, kernels);
    const auto same_as_input = [](const graph::InferContext& c) -> graph::Expected<std::vector<graph::TensorType>> {
      return std::vector<graph::TensorType>{c.input(0)};
    };
    schemas.add(graph::OpSchema{.name = "TestFreesScratch", .inputs = {"x"}, .infer = same_as_input, .summary = "test",
                                .no_gradient = "test op"});
    schemas.add(graph::OpSchema{.name = "TestAllocatesOnCommunication", .inputs = {"x"},
                                .infer = [](const graph::InferContext&) -> graph::Expected<std::vector<graph::TensorType>> {
                                  return std::vector<graph::TensorType>{{DType::f32, graph::Shape{kElements}}};
                                },
                                .summary = "test", .no_gradient = "test op"});
    kernels.add("TestFreesScratch", DeviceKind::cpu_async, {.fn = frees_scratch});
    kernels.add("TestAllocatesOnCommunication", DeviceKind::cpu_async,
                {.fn = allocates_on_communication, .on_communication_stream = true});
  }
};

// Chains of compute kernels that free scratch, each followed by a kernel on the communication stream
// that allocates a block of the same size, over several steps: the communication kernels never get a
// block a compute kernel freed.
TEST_CASE("Devices.a_kernel_on_the_communication_stream.never_gets_a_block_freed_on_the_compute_stream") {
  static const Tables tables;
  graph::Graph g;
  graph::Builder b(g, tables.schemas);
  b.set_device(graph::DeviceId{DeviceKind::cpu_async, 0});
  auto x = ops::placeholder(b, "x", DType::f32, {3});
  std::vector<graph::ValueRef> fetches;
  for (int chain = 0; chain < 4; ++chain) {
    graph::ValueRef v = x;
    for (int i = 0; i < 3; ++i) v = b.add_value({.op = "TestFreesScratch", .inputs = {v}});
    fetches.push_back(b.add_value({.op = "TestAllocatesOnCommunication", .inputs = {v}}));
  }
  REQUIRE(b.status().ok());
  Session session(g, tables.kernels, {.threads = 2});
  for (int step = 0; step < 5; ++step) {
    auto out = session.run({{"x", Tensor::from<float>({3}, {1, 2, 3})}}, fetches);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>(kElements, 1.0f));
  }
  std::lock_guard lock(blocks.mutex);
  REQUIRE(!blocks.compute_scratch.empty());
  REQUIRE(!blocks.communication_outputs.empty());
  for (const void* block : blocks.communication_outputs) {
    CAPTURE(block);
    CHECK(blocks.compute_scratch.count(block) == 0);
  }
}

}  // namespace
}  // namespace mirra::runtime
