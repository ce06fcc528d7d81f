// Kernels built once per node: a kernel's prepare runs once per node and plan (not per step), every
// run of the node reads the state it built, a new plan builds its own, a refused prepare refuses the
// plan naming the node; and the bounded cache such states keep their problems in.
#include <doctest/doctest.h>

#include <atomic>

#include "ops/ops.h"
#include "runtime/bounded_cache.h"
#include "runtime/session.h"
#include "tests/runtime/test_ops.h"

namespace mirra::runtime {
namespace {

using graph::AttrType;
using graph::DType;

std::atomic<int> prepared{0};

// Counts the runs of its node.
struct RunCount : KernelState {
  std::atomic<int64_t> runs{0};
};

graph::Expected<std::unique_ptr<KernelState>> prepare_run_count(const graph::Node& node, const Device& /*device*/) {
  if (graph::checked_attr<bool>(node, "refuse")) return graph::invalid_argument("this node's kernel refuses it");
  ++prepared;
  return std::unique_ptr<KernelState>(std::make_unique<RunCount>());
}

// Output: how many times this node has run in its plan, this run included.
Status run_count_kernel(KernelContext& ctx) {
  ctx.allocate_output(0, DType::i64, {}).mutable_data<int64_t>()[0] = ++ctx.state<RunCount>().runs;
  return Status();
}

struct Tables : TestOps {
  Tables() {
    add({.name = "TestRunCount",
         .attrs = {{"refuse", AttrType::boolean, false}},
         .infer = infers({DType::i64, graph::Shape{}}),
         .summary = "test: counts its node's runs"},
        {.fn = run_count_kernel, .prepare = prepare_run_count}, {graph::DeviceKind::cpu, graph::DeviceKind::cpu_async});
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

graph::ValueRef run_count(graph::Builder& b, const std::string& name, bool refuse = false) {
  return b.add_value({.op = "TestRunCount", .attrs = {{"refuse", refuse}}, .name = name});
}

TEST_CASE("KernelState.prepared_once_per_node_and_plan") {
  for (const char* device : {"cpu:0", "cpu_async:0"}) {
    CAPTURE(device);
    graph::Graph g;
    graph::Builder b(g, tables().schemas);
    b.set_device(graph::DeviceId::parse(device).value());
    const graph::ValueRef first = run_count(b, "first");
    const graph::ValueRef second = run_count(b, "second");
    REQUIRE(b.status().ok());
    Session session(g, tables().kernels, {.threads = 2});
    prepared = 0;
    for (int64_t step = 1; step <= 5; ++step) {
      auto out = session.run({}, {first, second});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      CHECK((*out)[0].values<int64_t>()[0] == step);  // the same state every step
      CHECK((*out)[1].values<int64_t>()[0] == step);  // each node its own
    }
    CHECK(prepared == 2);
    // Another request is another plan, whose nodes build their own state.
    auto alone = session.run({}, {second});
    REQUIRE(alone.ok());
    CHECK((*alone)[0].values<int64_t>()[0] == 1);
    CHECK(prepared == 3);
    // The first plan's state is still its own.
    auto again = session.run({}, {first, second});
    REQUIRE(again.ok());
    CHECK((*again)[0].values<int64_t>()[0] == 6);
  }
}

TEST_CASE("KernelState.a_refused_prepare_refuses_the_plan_naming_the_node") {
  graph::Graph g;
  graph::Builder b(g, tables().schemas);
  const graph::ValueRef fine = run_count(b, "fine");
  const graph::ValueRef refused = run_count(b, "refused", /*refuse=*/true);
  REQUIRE(b.status().ok());
  Session session(g, tables().kernels);
  auto out = session.run({}, {fine, refused});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == graph::StatusCode::invalid_argument);
  CHECK(out.status().message() == "node 'refused' (TestRunCount) on cpu:0: this node's kernel refuses it");
  auto alone = session.run({}, {fine});  // the session stays usable
  REQUIRE_MESSAGE(alone.ok(), alone.status().to_string());
}

TEST_CASE("BoundedCache.keeps_the_most_recently_used") {
  BoundedCache<int, std::string> cache(3);
  for (int key : {1, 2, 3}) cache.insert(key, std::make_shared<std::string>(std::to_string(key)));
  CHECK(cache.size() == 3);
  REQUIRE(cache.find(1) != nullptr);  // 1 is now the most recently used, 2 the least
  cache.insert(4, std::make_shared<std::string>("4"));
  CHECK(cache.size() == 3);
  CHECK(cache.find(2) == nullptr);
  CHECK(*cache.find(1) == "1");
  CHECK(*cache.find(3) == "3");
  CHECK(*cache.find(4) == "4");
  // The first value kept under a key stays.
  CHECK(*cache.insert(4, std::make_shared<std::string>("four")) == "4");
  // An entry dropped while a caller holds it lives on for that caller.
  const std::shared_ptr<std::string> held = cache.find(1);
  for (int key : {5, 6, 7}) cache.insert(key, std::make_shared<std::string>(std::to_string(key)));
  CHECK(cache.find(1) == nullptr);
  CHECK(*held == "1");
  CHECK(cache.size() == cache.capacity());
}

}  // namespace
}  // namespace mirra::runtime
