// Devices, streams and memory spaces: events order work across streams; a capture of worker streams
// replays their work in order; cpu_async memory is refused
// to host code, and a deliberately wrong kernel that touches host memory from a device's stream fails
// its step with an error naming the node, while the threads of a parallel loop inside a device's work
// may touch its memory; freeing is stream-ordered (a buffer dropped by the host
// while queued work still reads it returns to the pool only after that work, which AddressSanitizer
// would report otherwise); placement inserts copies between memory spaces, refuses a device without
// a kernel (or dtype, or operand dtype) for a node (a device kind with none of its own), or moves it
// to cpu:0 with soft placement; random DAGs on cpu_async
// equal deterministic runs on the CPU; feeds staged ahead run as feeds do; a collective on a
// communication stream leaves the compute stream free; a kernel reading a value on the host waits
// until the device wrote it.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "graph/print.h"
#include "ops/cpu/parallel.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "runtime/collectives/in_process_communicator.h"
#include "runtime/cpu/caching_allocator.h"
#include "runtime/execution_plan.h"
#include "runtime/gpu_devices.h"
#include "runtime/placement.h"
#include "runtime/session.h"
#include "tests/runtime/test_ops.h"
#include "tests/runtime/test_device_kinds.h"

namespace mirra::runtime {
namespace {

using namespace std::chrono_literals;
using graph::DeviceKind;
using graph::DType;

const graph::DeviceId kAsync0{DeviceKind::cpu_async, 0};

TEST_CASE("Stream.events.order_work_across_streams_and_the_host") {
  WorkerStream first("first"), second("second");
  std::atomic<int> step{0};
  first.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    step = 1;
  });
  const std::shared_ptr<Event> written = first.record();
  second.wait(written);
  int seen = -1;
  second.enqueue([&] { seen = step.load(); });
  bool called_back = false;
  written->then([&] { called_back = true; });
  second.synchronize();
  CHECK(seen == 1);
  CHECK(written->done());
  CHECK(called_back);
  InlineStream inline_stream;
  int ran = 0;
  inline_stream.enqueue([&] { ++ran; });
  CHECK(ran == 1);
  CHECK(inline_stream.record()->done());
}

// A capture of worker streams runs nothing while it records; each replay runs the recorded work again
// in order, a recorded wait holding its stream until the other stream's replay reaches the event.
TEST_CASE("Stream.a_capture_of_worker_streams.replays_their_work_in_order") {
  WorkerStream first("first"), second("second");
  InlineStream inline_stream;
  CHECK(first.capture({&first, &inline_stream}) == nullptr);  // work on an inline stream runs at once
  std::unique_ptr<StepCapture> capture = first.capture({&first, &second});
  REQUIRE(capture != nullptr);
  CHECK(capture->replays_host_code());
  std::mutex mutex;
  std::vector<std::string> ran;
  const auto note = [&](std::string what) {
    std::lock_guard lock(mutex);
    ran.push_back(std::move(what));
  };
  REQUIRE(capture->begin().ok());
  first.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    note("first");
  });
  second.wait(first.record());
  second.enqueue([&] { note("second"); });
  REQUIRE(capture->end().ok());
  first.synchronize();
  second.synchronize();
  CHECK(ran.empty());
  for (int replay = 0; replay < 3; ++replay) REQUIRE(capture->replay().ok());
  CHECK(ran == std::vector<std::string>{"first", "second", "first", "second", "first", "second"});
  int after = 0;
  first.enqueue([&] { after = 1; });  // no longer recorded
  first.synchronize();
  CHECK(after == 1);
}

TEST_CASE("Devices.cpu_async_memory.is_refused_to_host_code") {
  DeviceSet devices = DeviceSet::create({kAsync0});
  const Device& device = *devices.find(kAsync0);
  CHECK(device.asynchronous());
  CHECK(device.memory_space().to_string() == "cpu_async:0 memory");
  Tensor on_device = device.copy_from_host(Tensor::from<float>({2}, {1, 2}));
  CHECK(on_device.memory_space() == device.memory_space());
  try {
    (void)on_device.data<float>();
    FAIL("host code read device memory");
  } catch (const MemorySpaceError& e) {
    CHECK(std::string(e.what()).starts_with("a f32[2] tensor in cpu_async:0 memory was touched by code that may not touch it"));
  }
  CHECK(device.copy_to_host(on_device).to_vector<float>() == std::vector<float>{1, 2});
}

// A deliberately wrong kernel for cpu_async: it makes a host temporary and touches it from the
// device's stream, as a GPU kernel dereferencing a host pointer would.
Status touches_host_memory_kernel(KernelContext& ctx) {
  Tensor scratch = Tensor::from<float>({1}, {0});
  Tensor& out = ctx.allocate_output(0, DType::f32, ctx.input(0).shape());
  out.mutable_data<float>()[0] = scratch.data<float>()[0];
  return Status();
}

struct WrongKernelTables : TestOps {
  WrongKernelTables() {
    add({.name = "TestTouchesHost",
         .inputs = {"x"},
         .infer = infers_input_type(),
         .summary = "test: a kernel that touches host memory from a device"},
        {touches_host_memory_kernel}, {DeviceKind::cpu_async});
    add({.name = "TestCpuOnly", .inputs = {"x"}, .infer = infers_input_type(), .summary = "test: f32 only, CPU only"},
        {.fn = [](KernelContext& ctx) {
           ctx.set_output(0, ctx.input(0));
           return Status();
         },
         .dtypes = dtype_mask({DType::f32})});
    add({.name = "TestWidens",
         .inputs = {"x"},
         .infer = [](const graph::InferContext& ctx) -> graph::Expected<std::vector<graph::TensorType>> {
           return std::vector<graph::TensorType>{{DType::f64, ctx.input(0).shape}};
         },
         .summary = "test: any operand to f64, whose CPU kernel takes f32 operands only"},
        {.fn = [](KernelContext& ctx) {
           Tensor& out = ctx.allocate_output(0, DType::f64, ctx.input(0).shape());
           for (int64_t i = 0; i < out.num_elements(); ++i) out.mutable_data<double>()[i] = ctx.input(0).data<float>()[i];
           return Status();
         },
         .dtypes = dtype_mask({DType::f64}),
         .operand_dtypes = dtype_mask({DType::f32})});
  }
};

const WrongKernelTables& wrong_tables() {
  static const WrongKernelTables tables;
  return tables;
}

TEST_CASE("Devices.a_kernel_touching_memory_it_may_not.fails_its_step") {
  graph::Graph g;
  graph::Builder b(g, wrong_tables().schemas);
  b.set_device(kAsync0);
  auto x = ops::placeholder(b, "x", DType::f32, {1});
  auto y = b.add_value({.op = "TestTouchesHost", .inputs = {x}, .name = "wrong"});
  REQUIRE(b.status().ok());
  Session session(g, wrong_tables().kernels);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto out = session.run({{"x", Tensor::from<float>({1}, {3})}}, {y});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == graph::StatusCode::internal);
    CHECK(out.status().message().starts_with(
        "node 'wrong' (TestTouchesHost) on cpu_async:0: a f32[1] tensor in host memory was touched by code that may not touch it"));
  }
}

TEST_CASE("Devices.cpu_async.frees_in_stream_order") {
  DeviceSet devices = DeviceSet::create({kAsync0});
  const Device& device = *devices.find(kAsync0);
  const MemorySpace space = device.memory_space();
  Tensor buffer = Tensor::empty(device.allocator(), DType::f32, {4096});
  device.compute_stream().enqueue([&] {
    ScopedMemoryAccess access(space, false);
    std::fill_n(buffer.mutable_data<float>(), 4096, 1.0f);
  });
  device.compute_stream().synchronize();
  // Queued work reads the buffer through a raw pointer (no reference), after a while.
  const auto* raw = static_cast<const float*>(buffer.buffer()->data());
  float sum = 0;
  device.compute_stream().enqueue([raw, &sum] {
    std::this_thread::sleep_for(50ms);
    sum = std::accumulate(raw, raw + 4096, 0.0f);
  });
  const size_t in_use = device.allocator()->stats().bytes_in_use;
  buffer = Tensor();  // the host drops the last reference while the read is queued
  // Returned early, the block would be in the cache (poisoned under AddressSanitizer) before the read.
  CHECK(device.allocator()->stats().bytes_in_use == in_use);
  CHECK(device.allocator()->stats().bytes_cached == 0);
  device.compute_stream().synchronize();
  CHECK(sum == 4096);
  CHECK(device.allocator()->stats().bytes_in_use == in_use - CachingAllocator::size_class(4096 * sizeof(float)));
  CHECK(device.allocator()->stats().bytes_cached == CachingAllocator::size_class(4096 * sizeof(float)));
}

// Test kernels of a collective on a communication stream: TestSlow (a slow copy on one device),
// TestSumsOnCommunication (a + b, on its device's communication stream), TestPauses (a host copy
// after a pause) and TestStamps (a copy that notes when and on which thread it ran).
int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch() / 1ns; }
std::atomic<int64_t> slow_end_ns{0}, stamp_ns{0};
std::atomic<std::thread::id> summing_thread, stamping_thread;

Status copy_input(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  std::copy_n(x.data<float>(), x.num_elements(), y.mutable_data<float>());
  return Status();
}

struct CommunicationKernelTables : TestOps {
  CommunicationKernelTables() {
    const auto add_op = [&](const char* op, const KernelDef& kernel, DeviceKind kind) {
      add({.name = op, .inputs = {"x"}, .infer = infers_input_type()}, kernel, {kind});
    };
    add_op("TestSlow",
           {.fn = [](KernelContext& ctx) {
              std::this_thread::sleep_for(300ms);
              const Status status = copy_input(ctx);
              slow_end_ns = now_ns();
              return status;
            }},
           DeviceKind::cpu_async);
    add_op("TestPauses",
           {.fn = [](KernelContext& ctx) {
              std::this_thread::sleep_for(50ms);
              return copy_input(ctx);
            }},
           DeviceKind::cpu);
    add_op("TestStamps",
           {.fn = [](KernelContext& ctx) {
              stamp_ns = now_ns();
              stamping_thread = std::this_thread::get_id();
              return copy_input(ctx);
            }},
           DeviceKind::cpu_async);
    add({.name = "TestSumsOnCommunication", .inputs = {"a", "b"}, .infer = infers_input_type()},
        {.fn =
             [](KernelContext& ctx) {
               summing_thread = std::this_thread::get_id();
               const Tensor &a = ctx.input(0), &b = ctx.input(1);
               Tensor& sum = ctx.allocate_output(0, a.dtype(), a.shape());
               for (int64_t i = 0; i < a.num_elements(); ++i) sum.mutable_data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
               return Status();
             },
         .on_communication_stream = true},
        {DeviceKind::cpu_async});
  }
};

// A collective on a device's communication stream waits there for another device's slow input (two
// logical devices of one device's memory, as logical GPUs: no copies between them), and the device's
// compute stream goes on meanwhile: a node enqueued on it later runs long before that input is ready
// (on the compute stream it would queue behind the collective). The collective's consumers still see
// its result, and the other way round it waits for the compute stream's work.
TEST_CASE("Devices.a_kernel_on_the_communication_stream.leaves_the_compute_stream_free") {
  static const CommunicationKernelTables tables;
  const graph::DeviceId async1{DeviceKind::cpu_async, 1};
  for (int attempt = 0; attempt < 2; ++attempt) {  // a second step runs the same way
    CAPTURE(attempt);
    graph::Graph g;
    graph::Builder b(g, tables.schemas);
    auto x = ops::placeholder(b, "x", DType::f32, {3});
    b.set_device(async1);
    auto slow = b.add_value({.op = "TestSlow", .inputs = {x}});
    b.set_device(kAsync0);
    auto doubled = ops::add(b, x, x);  // on the compute stream before the collective
    auto sum = b.add_value({.op = "TestSumsOnCommunication", .inputs = {slow, doubled}});
    auto after = ops::add(b, sum, x);  // on the compute stream, after the collective
    b.set_device(graph::DeviceId{DeviceKind::cpu, 0});
    auto paused = b.add_value({.op = "TestPauses", .inputs = {x}});
    b.set_device(kAsync0);
    auto stamped = b.add_value({.op = "TestStamps", .inputs = {paused}});
    REQUIRE(b.status().ok());
    Session session(g, tables.kernels, {.threads = 2, .logical_gpus_per_gpu = 2});
    auto out = session.run({{"x", Tensor::from<float>({3}, {1, 2, 3})}}, {after, stamped});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{4, 8, 12});
    CHECK((*out)[1].to_vector<float>() == std::vector<float>{1, 2, 3});
    CHECK(stamp_ns.load() < slow_end_ns.load());
    CHECK(summing_thread.load() != stamping_thread.load());
    CHECK(summing_thread.load() != std::this_thread::get_id());
  }
}

// A kernel that reads a value on the host (KernelDef::host_memory_inputs) from a node on a stream is
// made ready only when the device has run that node: a GPU stream launches work at once, so the
// value of a copy to the host lands after it is enqueued (the learning rate an update reads, a copy
// to another device's memory through the host). A consumer on a stream that reads the value in the
// device's memory follows its producer on the stream as soon as that is enqueued.
TEST_CASE("Plan.a_kernel_reading_a_value_on_the_host.waits_until_the_device_wrote_it") {
  const graph::DeviceId async1{DeviceKind::cpu_async, 1};
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(kAsync0);
  auto x = ops::placeholder(b, "x", DType::f32, {3});
  auto y = ops::neg(b, x);
  auto on_host = b.add_value({.op = std::string(kCopyToHostOp), .inputs = {y}, .name = "to_host"});
  auto follows = ops::neg(b, y);
  b.set_device(async1);
  auto moved = b.add_value({.op = std::string(kCopyFromHostOp), .inputs = {on_host}, .name = "to_async1"});
  REQUIRE(b.status().ok());
  DeviceSet devices = DeviceSet::create({kAsync0, async1});
  auto plan = build_plan(g, {.fed = {x.node}, .fetches = {follows, moved}}, ops::kernels(), devices, kAsync0);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  const auto index_of = [&](graph::NodeId id) {
    for (uint32_t i = 0; i < plan->nodes.size(); ++i) {
      if (plan->nodes[i].node->id == id) return i;
    }
    FAIL("node " << id << " is not in the plan");
    return kNotInPlan;
  };
  const auto holds = [](std::span<const uint32_t> list, uint32_t i) { return std::find(list.begin(), list.end(), i) != list.end(); };
  const uint32_t copy_to_host = index_of(on_host.node), copy_from_host = index_of(moved.node);
  CHECK(bool{plan->nodes[copy_to_host].on_stream});
  CHECK(bool{plan->nodes[copy_from_host].on_stream});
  CHECK_FALSE(holds(plan->early_consumers_of(copy_to_host), copy_from_host));
  CHECK(holds(plan->late_consumers_of(copy_to_host), copy_from_host));
  CHECK(holds(plan->early_consumers_of(index_of(y.node)), index_of(follows.node)));
  CHECK(holds(plan->early_consumers_of(index_of(y.node)), copy_to_host));
}

// A device's work may run a parallel loop: oneTBB hands its tasks to other threads, which touch the
// device's memory for it (a kernel's loop, the in-process all-reduce of an AllReduce rank).
TEST_CASE("Devices.parallel_loops_in_device_work.touch_the_device_memory_from_every_thread") {
  DeviceSet devices = DeviceSet::create({kAsync0});
  const Device& device = *devices.find(kAsync0);
  const MemorySpace space = device.memory_space();
  constexpr int64_t kElements = int64_t{1} << 21;  // 32 all-reduce chunks
  std::vector<Tensor> inputs, outputs;
  for (int p = 0; p < 2; ++p) {
    inputs.push_back(device.copy_from_host(Tensor::from<float>({kElements}, std::vector<float>(kElements, p + 1.0f))));
    outputs.push_back(Tensor::empty(device.allocator(), DType::f32, {kElements}));
  }
  std::mutex mutex;
  std::set<std::thread::id> loop_threads;
  std::string error;
  InProcessCommunicator collective;
  device.compute_stream().enqueue([&] {
    ScopedMemoryAccess access(space, /*host_too=*/false);
    try {
      // The first task waits (a while at most) for another thread to take one, so the loop is shared.
      ops::cpu::parallel_for(64, 1, [&](int64_t begin, int64_t) {
        const auto waited_since = std::chrono::steady_clock::now();
        while (begin == 0 && std::chrono::steady_clock::now() - waited_since < 5s) {
          std::lock_guard lock(mutex);
          if (loop_threads.size() > 1) break;
        }
        (void)inputs[0].data<float>()[begin];
        std::lock_guard lock(mutex);
        loop_threads.insert(std::this_thread::get_id());
      });
      for (int p = 0; p < 2; ++p) {
        const CollectiveCall call{.group = "bucket", .instance = 0, .participant = p, .group_size = 2};
        collective.all_reduce(call, Reduction::sum, std::span(&inputs[p], 1), std::span(&outputs[p], 1))->then([&](Status status) {
          if (!status.ok()) error = status.message();
        });
      }
    } catch (const MemorySpaceError& e) {
      error = e.what();
    }
  });
  device.compute_stream().synchronize();
  CHECK_MESSAGE(error.empty(), error);
  // Whether a second thread joined is the scheduler's choice (on a loaded machine it may not within
  // the wait); the access checks above are what this test is for.
  if (loop_threads.size() < 2) MESSAGE("only one thread ran the loop this time: the cross-thread access was not exercised");
  const std::vector<float> sums = device.copy_to_host(outputs[1]).to_vector<float>();
  CHECK(std::all_of(sums.begin(), sums.end(), [](float v) { return v == 3.0f; }));
}

// Without a usable GPU (no device, no driver, or a build without CUDA), asking for one is an
// unavailable error naming it: from the device set, and from a session whose graph names it.
TEST_CASE("Devices.a_gpu_that_is_not_there.is_unavailable") {
  if (list_gpus().ok()) return;  // the GPU tests (tests/gpu) cover a machine with one
  const graph::DeviceId gpu{DeviceKind::gpu, 0};
  DeviceSet devices = DeviceSet::create({gpu, {DeviceKind::cpu, 0}});
  CHECK(devices.find(gpu) == nullptr);
  CHECK(devices.find({DeviceKind::cpu, 0}) != nullptr);
  CHECK(devices.status().code() == graph::StatusCode::unavailable);
  CHECK(devices.status().message().starts_with("gpu:0: "));
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(gpu);
  auto y = ops::relu(b, ops::placeholder(b, "x", DType::f32, {1}));
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  auto out = session.run({{"x", Tensor::from<float>({1}, {1})}}, {y});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == graph::StatusCode::unavailable);
  CHECK(out.status().message().starts_with("gpu:0: "));
}

// How many of the graph's nodes run `op`.
int count_ops(const graph::Graph& g, std::string_view op) {
  int count = 0;
  for (const graph::Node& node : g.nodes()) count += node.op == op;
  return count;
}

TEST_CASE("Placement.copies_cross_memory_spaces_once_per_value_and_space") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {2});  // on cpu:0 (host)
  b.set_device(kAsync0);
  auto y = ops::square(b, x);
  auto z = ops::neg(b, x);  // the same copy of x serves both
  b.set_device(graph::DeviceId{DeviceKind::cpu_async, 1});
  auto w = ops::add(b, y, z);  // device to device: through the host
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {w, y});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{0, 2});
  CHECK((*out)[1].to_vector<float>() == std::vector<float>{1, 4});
  CHECK((*out)[0].memory_space().host);  // fetches come back in host memory
  CHECK(count_ops(session.graph(), "CopyToHost") == 2);    // y and z leave cpu_async:0
  CHECK(count_ops(session.graph(), "CopyFromHost") == 3);  // x enters cpu_async:0 once; y and z enter cpu_async:1
  CHECK(session.graph().contains("x/to_cpu_async:0"));
}

// Logical devices of one physical device (here cpu_async, the GPU's model) share its memory: values
// pass between them without copies, each device's stream may touch the others' buffers, and the
// shared space is the first logical device's.
TEST_CASE("Placement.logical_devices_of_one_device_share_its_memory") {
  const graph::DeviceId async1{DeviceKind::cpu_async, 1}, async2{DeviceKind::cpu_async, 2};
  DeviceSet devices = DeviceSet::create({kAsync0, async1, async2}, 1, nullptr, {.logical_gpus_per_gpu = 2});
  CHECK(devices.find(async1)->memory_space() == devices.find(kAsync0)->memory_space());
  CHECK(devices.find(async1)->memory_space().to_string() == "cpu_async:0 memory");
  CHECK(devices.find(async2)->memory_space().to_string() == "cpu_async:2 memory");
  CHECK(devices.owner_of(devices.find(async1)->memory_space()) == devices.find(kAsync0));

  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {2});  // on cpu:0 (host)
  b.set_device(kAsync0);
  auto y = ops::square(b, x);
  b.set_device(async1);
  auto z = ops::neg(b, y);  // reads cpu_async:0's buffer in place
  b.set_device(async2);
  auto w = ops::add(b, y, z);  // another physical device: both through the host
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels(), {.logical_gpus_per_gpu = 2});
  auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {z, w});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{-1, -4});
  CHECK((*out)[1].to_vector<float>() == std::vector<float>{0, 0});
  CHECK(count_ops(session.graph(), "CopyToHost") == 2);    // y and z leave cpu_async:0's memory for cpu_async:2's
  CHECK(count_ops(session.graph(), "CopyFromHost") == 3);  // x enters the first memory once; y and z enter the second

  // A session of the second logical device alone: its memory is named by a device it does not have.
  graph::Graph alone;
  graph::Builder c(alone, ops::registry());
  auto a = ops::placeholder(c, "a", DType::f32, {2});
  c.set_device(async1);
  auto doubled = ops::add(c, a, a);
  c.set_device(graph::DeviceId{DeviceKind::cpu, 0});
  auto back = ops::neg(c, doubled);  // copied out by cpu_async:1
  REQUIRE(c.status().ok());
  Session second(alone, ops::kernels(), {.logical_gpus_per_gpu = 2});
  auto result = second.run({{"a", Tensor::from<float>({2}, {1, 2})}}, {back, doubled});
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  CHECK((*result)[0].to_vector<float>() == std::vector<float>{-2, -4});
  CHECK((*result)[1].to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE("Session.staged_feeds.run_as_feeds_do_and_belong_to_their_session") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(kAsync0);
  auto x = ops::placeholder(b, "x", DType::f32, {-1});  // fed into cpu_async:0's memory
  auto y = ops::square(b, x);
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  // Staging the second batch before the first runs, as the trainer does.
  auto first = session.stage({{"x", Tensor::from<float>({2}, {1, 2})}});
  auto second = session.stage({{"x", Tensor::from<float>({3}, {3, 4, 5})}});
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  const graph::ValueRef fetches[] = {y};
  auto out = session.run_staged(std::move(*first), fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{1, 4});
  out = session.run_staged(std::move(*second), fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{9, 16, 25});
  // Checked as run checks them; another session's are refused.
  CHECK(session.stage({{"x", Tensor::from<double>({1}, {1})}}).status().message() ==
        "feed 'x': expected f32[?], got f64[1]");
  Session other(g, ops::kernels());
  auto foreign = other.stage({{"x", Tensor::from<float>({1}, {1})}});
  REQUIRE(foreign.ok());
  CHECK(session.run_staged(std::move(*foreign), fetches).status().message() == "the feeds were not staged by this session");
}

// A device kind of no kernels but those registered for it (none here).
TEST_CASE("Placement.refuses_a_device_without_a_kernel_or_moves_it_with_soft_placement") {
  const graph::DeviceId bare{mirra::test::stream_device_kind("test_bare", std::nullopt), 0};
  for (DType dtype : {DType::f32, DType::f64}) {
    graph::Graph g;
    graph::Builder b(g, wrong_tables().schemas);
    auto x = ops::placeholder(b, "x", dtype, {1});
    b.set_device(bare);
    auto y = b.add_value({.op = "TestCpuOnly", .inputs = {x}, .name = "cpu_only"});
    REQUIRE(b.status().ok());
    Session strict(g, wrong_tables().kernels);
    auto refused = strict.run({}, {y});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == graph::StatusCode::unimplemented);
    CHECK(refused.status().message() == "node 'cpu_only' (TestCpuOnly) on test_bare:0: no test_bare kernel for op 'TestCpuOnly'");
    Session soft(g, wrong_tables().kernels, {.soft_placement = true});
    Tensor value = dtype == DType::f32 ? Tensor::from<float>({1}, {5}) : Tensor::from<double>({1}, {5});
    auto moved = soft.run({{"x", value}}, {y});
    if (dtype == DType::f32) {
      REQUIRE_MESSAGE(moved.ok(), moved.status().to_string());
      CHECK(soft.graph().node(*soft.graph().find("cpu_only")).device->to_string() == "cpu:0");
    } else {
      REQUIRE_FALSE(moved.ok());
      CHECK(moved.status().message() == "node 'cpu_only' (TestCpuOnly) on cpu:0: the cpu kernel of 'TestCpuOnly' does not take f64");
    }
  }
}

// A kernel's operand dtypes count too: ops whose output type differs from their operands' (products
// with f32_output) must not land on a kernel that cannot read the operands.
TEST_CASE("Placement.refuses_a_kernel_for_the_operand_dtype") {
  for (DType dtype : {DType::f32, DType::f64}) {
    graph::Graph g;
    graph::Builder b(g, wrong_tables().schemas);
    auto x = ops::placeholder(b, "x", dtype, {2});
    auto y = b.add_value({.op = "TestWidens", .inputs = {x}, .name = "widen"});
    REQUIRE(b.status().ok());
    Session session(g, wrong_tables().kernels);
    Tensor value = dtype == DType::f32 ? Tensor::from<float>({2}, {1, 2}) : Tensor::from<double>({2}, {1, 2});
    auto out = session.run({{"x", value}}, {y});
    if (dtype == DType::f32) {
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      CHECK((*out)[0].to_vector<double>() == std::vector<double>{1, 2});
    } else {
      REQUIRE_FALSE(out.ok());
      CHECK(out.status().message() == "node 'widen' (TestWidens) on cpu:0: the cpu kernel of 'TestWidens' does not take f64 operands");
    }
  }
}

}  // namespace
}  // namespace mirra::runtime
