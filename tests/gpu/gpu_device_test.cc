// The GPU device on a real GPU: copies round trip; staged feeds arrive through the copy stream; its stream orders work with a CPU stream through
// events and reports completion; the caching allocator stops calling cudaMalloc after the first step
// of a graph; a failing kernel's error names the node, its op and the device.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "ops/ops.h"
#include "ops/registry.h"
#include "runtime/session.h"

namespace mirra::runtime {
namespace {

using namespace std::chrono_literals;
using graph::DType;

const graph::DeviceId kGpu0{graph::DeviceKind::gpu, 0};

TEST_CASE("Gpu.copies_round_trip") {
  DeviceSet devices = DeviceSet::create({kGpu0});
  REQUIRE_MESSAGE(devices.status().ok(), devices.status().to_string());
  const Device& gpu = *devices.find(kGpu0);
  CHECK(gpu.asynchronous());
  CHECK(gpu.memory_space().to_string() == "gpu:0 memory");
  std::vector<float> values(100000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  const Tensor on_gpu = gpu.copy_from_host(Tensor::from<float>({100000}, values));
  CHECK(on_gpu.memory_space() == gpu.memory_space());
  CHECK_THROWS_AS((void)on_gpu.data<float>(), MemorySpaceError);
  CHECK(gpu.copy_to_host(on_gpu).to_vector<float>() == values);
  CHECK(gpu.copy_to_host(gpu.copy_from_host(Tensor::from<float>({0}, std::vector<float>{}))).num_elements() == 0);
}

TEST_CASE("Gpu.staged_feeds.arrive_through_the_copy_stream") {
  DeviceSet devices = DeviceSet::create({kGpu0});
  REQUIRE(devices.status().ok());
  const Device& gpu = *devices.find(kGpu0);
  std::vector<float> values(1 << 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000);
  Device::Staged staged = gpu.stage_from_host(Tensor::from<float>({static_cast<int64_t>(values.size())}, values));
  REQUIRE(staged.ready != nullptr);
  gpu.compute_stream().wait(staged.ready);
  CHECK(gpu.copy_to_host(staged.tensor).to_vector<float>() == values);
  CHECK(staged.ready->done());

  // Two batches staged before either runs, as the trainer stages the next one.
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(kGpu0);
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 256});
  auto w = ops::variable(b, "w", {256, 256}, ops::Initializer::ones());
  auto y = ops::reduce_sum(b, ops::matmul(b, x, w), ops::Axes::all());
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  auto first = session.stage({{"x", Tensor::from<float>({64, 256}, std::vector<float>(64 * 256, 1.0f))}});
  auto second = session.stage({{"x", Tensor::from<float>({32, 256}, std::vector<float>(32 * 256, 2.0f))}});
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  const graph::ValueRef fetches[] = {y};
  auto out = session.run_staged(std::move(*first), fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].to_vector<float>()[0] == 64.0f * 256 * 256);
  out = session.run_staged(std::move(*second), fetches);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK((*out)[0].to_vector<float>()[0] == 2.0f * 32 * 256 * 256);
}

TEST_CASE("Gpu.stream_events_order_work_with_a_cpu_stream") {
  DeviceSet devices = DeviceSet::create({kGpu0});
  REQUIRE(devices.status().ok());
  Stream& gpu = devices.find(kGpu0)->compute_stream();
  WorkerStream cpu("cpu");
  std::atomic<int> step{0};
  cpu.enqueue([&] {
    std::this_thread::sleep_for(20ms);
    step = 1;
  });
  gpu.wait(cpu.record());  // a host event: the GPU stream waits for it in a host function
  const std::shared_ptr<Event> after = gpu.record();
  int seen = -1;
  cpu.wait(after);  // a GPU event, waited for by a CPU stream
  cpu.enqueue([&] { seen = step.load(); });
  cpu.synchronize();
  CHECK(after->done());
  CHECK(seen == 1);
  std::atomic<bool> reported{false};
  gpu.enqueue([&] { gpu.when_device_done([&](graph::Status status) { reported = status.ok(); }); });
  gpu.synchronize();
  CHECK(reported.load());
}

TEST_CASE("Gpu.allocator.needs_no_cudaMalloc_after_the_first_step") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(kGpu0);
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 64});
  auto w = ops::variable(b, "w", {64, 64}, ops::Initializer::glorot_uniform());
  auto y = ops::reduce_sum(b, ops::relu(b, ops::matmul(b, x, w)), ops::Axes::all());
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  const Tensor feed = Tensor::from<float>({32, 64}, std::vector<float>(32 * 64, 0.25f));
  REQUIRE(session.run({{"x", feed}}, {y}).ok());
  const AllocatorStats first = session.devices().find(kGpu0)->allocator()->stats();
  for (int step = 0; step < 5; ++step) REQUIRE(session.run({{"x", feed}}, {y}).ok());
  const AllocatorStats later = session.devices().find(kGpu0)->allocator()->stats();
  CHECK(later.system_allocations == first.system_allocations);
  CHECK(later.cache_hits > first.cache_hits);
}

TEST_CASE("Gpu.kernel_errors_name_the_node_op_and_device") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(kGpu0);
  auto a = ops::placeholder(b, "a", DType::f32, {-1, -1});
  auto c = ops::matmul(b, a, a);
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  auto out = session.run({{"a", Tensor::from<float>({2, 3}, std::vector<float>(6, 1.0f))}}, {c});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("(MatMul) on gpu:0") != std::string::npos);
}

}  // namespace
}  // namespace mirra::runtime
