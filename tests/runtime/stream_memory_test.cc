// Memory and streams: a block is handed out again only to allocations for the stream it was
// allocated for. A GPU kernel frees its scratch (a cuDNN workspace, a permuted filter) as soon as it
// has launched, while its work is still queued on the compute stream; a kernel on the communication
// stream that received that block would write it while the compute stream may still use it, with
// nothing ordering the two. cpu_async kernels finish their work before they free, so there the reuse
// would be harmless, but it is the same reuse: these tests assert that it never happens, in the
// allocator and through a session on cpu_async devices (the GPU's model). And a feed staged into
// device memory is waited for by every device that shares that memory, in steps and their replays;
// a host wait for a stream being recorded is refused instead of waiting for ever, and a feed staged
// meanwhile does not wait for the recording.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <vector>

#include "ops/ops.h"
#include "runtime/cpu/caching_allocator.h"
#include "runtime/session.h"
#include "tests/runtime/test_ops.h"

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

// Reads a feed's first and last element.
Status reads_ends(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.allocate_output(0, DType::f32, TensorShape{2});
  out.mutable_data<float>()[0] = x.data<float>()[0];
  out.mutable_data<float>()[1] = x.data<float>()[x.num_elements() - 1];
  return Status();
}

// The builtin ops and this file's test ops, with their cpu_async kernels.
struct Tables : TestOps {
  Tables() {
    const auto add_op = [&](const char* name, graph::InferFn infer, const KernelDef& kernel) {
      add({.name = name, .inputs = {"x"}, .infer = std::move(infer)}, kernel, {DeviceKind::cpu_async});
    };
    add_op("TestFreesScratch", infers_input_type(), {.fn = frees_scratch});
    add_op("TestAllocatesOnCommunication", infers({DType::f32, graph::Shape{kElements}}),
           {.fn = allocates_on_communication, .on_communication_stream = true});
    add_op("TestReadsEnds", infers({DType::f32, graph::Shape{2}}), {.fn = reads_ends});
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

// A host wait for a stream being recorded would wait for ever (its work runs only in replays): it is
// refused, and the stream waits as usual once the recording ended.
TEST_CASE("Streams.a_host_wait_while_recording.is_refused") {
  WorkerStream stream("recorded");
  std::unique_ptr<StepCapture> capture = stream.capture({&stream});
  REQUIRE(capture != nullptr);
  REQUIRE(capture->begin().ok());
  CHECK(stream.recording());
  int runs = 0;
  stream.enqueue([&runs] { ++runs; });
  CHECK_THROWS_AS(stream.synchronize(), DeviceError);
  REQUIRE(capture->end().ok());
  CHECK(!stream.recording());
  stream.synchronize();
  CHECK(runs == 0);
  REQUIRE(capture->replay().ok());
  CHECK(runs == 1);
}

// A feed staged while the device's compute stream is being recorded is copied at once: the copy
// stream waits for no recorded point, which only a replay would reach (a GPU's copy stream would
// join the capture).
TEST_CASE("Devices.a_feed_staged_while_a_step_is_recorded.is_copied_at_once") {
  DeviceSet devices = DeviceSet::create({graph::DeviceId{DeviceKind::cpu_async, 0}});
  Device& device = *devices.devices().front();
  Stream& compute = device.compute_stream();
  std::unique_ptr<StepCapture> capture = compute.capture({&compute});
  REQUIRE(capture != nullptr);
  REQUIRE(capture->begin().ok());
  Device::Staged staged = device.stage_from_host(Tensor::from<float>({3}, {1, 2, 3}));
  REQUIRE(staged.ready != nullptr);
  auto copied = std::make_shared<std::promise<void>>();
  std::future<void> done = copied->get_future();
  staged.ready->then([copied] { copied->set_value(); });
  const bool in_time = done.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  REQUIRE(capture->end().ok());
  REQUIRE(capture->replay().ok());  // reaches what the copy might have waited for
  CHECK(in_time);
  CHECK(device.copy_to_host(staged.tensor).to_vector<float>() == std::vector<float>{1, 2, 3});
}

// A feed staged ahead into device memory (copied on the copy stream of the device that owns the
// memory) is read on a logical sibling of that device, which shares the memory but not the streams:
// its kernel waits for the copy as the owner's would. The feed is large, so that a read not ordered
// after the copy would see the block before the copy reached its end.
TEST_CASE("Session.a_staged_feed.is_waited_for_by_every_device_of_its_memory") {
  static const Tables tables;
  constexpr int64_t kFed = int64_t{16} << 20;  // 64 MiB of f32
  graph::Graph g;
  graph::Builder b(g, tables.schemas);
  b.set_device(graph::DeviceId{DeviceKind::cpu_async, 0});
  auto x = ops::placeholder(b, "x", DType::f32, {kFed});
  // A value in cpu_async:0's memory, fed in place of what computes it (a placeholder's own value
  // is in host memory, copied in by the step).
  auto in_device_memory = b.add_value({.op = "Identity", .inputs = {x}, .name = "in_device_memory"});
  b.set_device(graph::DeviceId{DeviceKind::cpu_async, 1});
  auto ends = b.add_value({.op = "TestReadsEnds", .inputs = {in_device_memory}});
  REQUIRE(b.status().ok());
  for (const bool captured : {false, true}) {  // replays copy the feed into the recorded buffer
    CAPTURE(captured);
    // cpu_async:1 is the second logical device of cpu_async:0's memory: it reads the value in place.
    Session session(g, tables.kernels, {.threads = 2, .logical_gpus_per_gpu = 2, .capture_steps = captured});
    for (int step = 1; step <= 4; ++step) {
      CAPTURE(step);
      Tensor fed = Tensor::empty(host_allocator(), DType::f32, TensorShape{kFed});
      std::fill_n(fed.mutable_data<float>(), kFed, static_cast<float>(step));
      auto staged = session.stage({{"in_device_memory", fed}});
      REQUIRE_MESSAGE(staged.ok(), staged.status().to_string());
      auto out = session.run_staged(std::move(*staged), std::vector<graph::ValueRef>{ends});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      CHECK((*out)[0].to_vector<float>() == std::vector<float>{static_cast<float>(step), static_cast<float>(step)});
    }
    if (captured) CHECK(session.replayed_steps() >= 2);
  }
}

}  // namespace
}  // namespace mirra::runtime
