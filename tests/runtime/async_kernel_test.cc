// Asynchronous kernels: the executor finishes a node only when its done callback runs, never blocks
// a worker thread meanwhile (two kernels that each finish only after the other started complete on
// a one-thread session), reports an asynchronous error with the node's name and stays usable, runs
// them in deterministic mode too; a session numbers the executions of each collective group for its
// kernels, whatever else it runs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "ops/ops.h"
#include "runtime/session.h"
#include "tests/runtime/test_ops.h"

namespace mirra::runtime {
namespace {

using namespace std::chrono_literals;
using graph::AttrType;
using graph::DType;

// The names of the TestMeet nodes that have started, shared with their helper threads.
struct Started {
  std::mutex mutex;
  std::set<std::string> names;
  std::vector<std::thread> helpers;
  ~Started() {
    for (std::thread& t : helpers) t.join();
  }
} started;

// Copies x to its output, finishing from a helper thread once the node named by `partner` has
// started too (or with an error after 10 s: a blocked executor fails the test instead of hanging
// it). `fail` makes it finish with an error instead.
void test_meet_kernel(KernelContext& ctx, KernelDone done) {
  const std::string partner = ctx.attr<std::string>("partner");
  Tensor& out = ctx.allocate_output(0, DType::f32, ctx.input(0).shape());
  std::copy(ctx.input(0).values<float>().begin(), ctx.input(0).values<float>().end(), out.mutable_data<float>());
  const bool fail = ctx.attr<bool>("fail");
  std::lock_guard lock(started.mutex);
  started.names.insert(ctx.node().name);
  started.helpers.emplace_back([partner, fail, done = std::move(done)] {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      {
        std::lock_guard lock(started.mutex);
        if (partner.empty() || started.names.contains(partner)) {
          done(fail ? graph::unavailable("the test peer went away") : graph::Status());
          return;
        }
      }
      std::this_thread::sleep_for(1ms);
    }
    done(graph::internal_error("'" + partner + "' never started: the executor blocked a worker"));
  });
}

Status instance_kernel(KernelContext& ctx) {
  ctx.allocate_output(0, DType::i64, {}).mutable_data<int64_t>()[0] = ctx.collective_instance();
  return Status();
}

struct TestTables : TestOps {
  TestTables() {
    add({.name = "TestMeet",
         .inputs = {"x"},
         .attrs = {{"partner", AttrType::string, std::string()}, {"fail", AttrType::boolean, false}},
         .infer = infers_input_type(),
         .summary = "test: finishes once its partner started"},
        {.async_fn = test_meet_kernel});
    add({.name = "TestInstance",
         .attrs = {{"group", AttrType::string, std::string()}},
         .infer = infers({DType::i64, graph::Shape{}}),
         .summary = "test: a collective's rank, giving which execution of its group it ran in"},
        {.fn = instance_kernel, .collective = true});
  }
};

const TestTables& tables() {
  static const TestTables t;
  return t;
}

graph::ValueRef meet(graph::Builder& b, graph::ValueRef x, const std::string& name, const std::string& partner,
                     bool fail = false) {
  return b.add_value({.op = "TestMeet", .inputs = {x}, .attrs = {{"partner", partner}, {"fail", fail}}, .name = name});
}

TEST_CASE("Executor.async_kernels.never_block_a_worker_thread") {
  graph::Graph g;
  graph::Builder b(g, tables().schemas);
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  // a finishes only after b started and b only after a started: with one thread, blocking on
  // either before starting the other would never finish.
  auto first = ops::neg(b, meet(b, x, "a", "b"));
  auto second = ops::square(b, meet(b, x, "b", "a"));
  REQUIRE(b.status().ok());
  Session session(g, tables().kernels, {.threads = 1, .trace = true});
  for (int step = 0; step < 3; ++step) {
    {
      std::lock_guard lock(started.mutex);
      started.names.clear();
    }
    auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {first, second});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{-1, -2});
    CHECK((*out)[1].to_vector<float>() == std::vector<float>{1, 4});
  }
  // The timeline spans each asynchronous node from its start to its done callback.
  for (const NodeTiming& t : session.last_timeline()) CHECK(t.end_ns >= t.start_ns);
}

TEST_CASE("Executor.async_kernels.errors_name_the_node_and_the_session_recovers") {
  graph::Graph g;
  graph::Builder b(g, tables().schemas);
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  auto failing = ops::neg(b, meet(b, x, "peer_call", "", /*fail=*/true));
  auto fine = ops::neg(b, meet(b, x, "local_call", ""));
  REQUIRE(b.status().ok());
  for (bool deterministic : {false, true}) {
    CAPTURE(deterministic);
    Session session(g, tables().kernels, {.threads = 2, .deterministic = deterministic});
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto bad = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {failing, fine});
      REQUIRE_FALSE(bad.ok());
      CHECK(bad.status().code() == graph::StatusCode::unavailable);
      CHECK(bad.status().message() == "node 'peer_call' (TestMeet) on cpu:0: the test peer went away");
      auto good = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {fine});
      REQUIRE_MESSAGE(good.ok(), good.status().to_string());
      CHECK((*good)[0].to_vector<float>() == std::vector<float>{-1, -2});
    }
  }
}

// Two ranks of group g1 and one of g2, and other work: each step runs the next execution of the
// groups its plan holds (both g1 ranks the same one), and steps without them leave them be; a failed
// step's executions are not run again.
TEST_CASE("Session.numbers_each_collective_group's_executions") {
  graph::Graph g;
  graph::Builder b(g, tables().schemas);
  const graph::ValueRef a = b.add_value({.op = "TestInstance", .attrs = {{"group", std::string("g1")}}, .name = "a"});
  const graph::ValueRef a2 = b.add_value({.op = "TestInstance", .attrs = {{"group", std::string("g1")}}, .name = "a2"});
  const graph::ValueRef c = b.add_value({.op = "TestInstance", .attrs = {{"group", std::string("g2")}}, .name = "c"});
  const graph::ValueRef x = ops::placeholder(b, "x", DType::f32, {2});
  const graph::ValueRef other = ops::neg(b, x);
  const graph::ValueRef failing = b.add_value({.op = "TestMeet", .inputs = {x}, .attrs = {{"fail", true}}, .name = "failing"});
  REQUIRE(b.status().ok());
  Session session(g, tables().kernels);
  const runtime::Feeds feed = {{"x", Tensor::from<float>({2}, {1, 2})}};
  const auto instances = [&](std::vector<graph::ValueRef> fetches, const runtime::Feeds& feeds = {}) {
    auto out = session.run(feeds, fetches);
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    std::vector<int64_t> got;
    for (const Tensor& t : *out) {
      if (t.dtype() == DType::i64) got.push_back(t.to_vector<int64_t>()[0]);
    }
    return got;
  };
  CHECK(instances({a}) == std::vector<int64_t>{0});
  CHECK(instances({a, a2}) == std::vector<int64_t>{1, 1});
  CHECK(instances({other}, feed).empty());
  CHECK(instances({c}) == std::vector<int64_t>{0});
  CHECK(instances({a, c}) == std::vector<int64_t>{2, 1});
  CHECK_FALSE(session.run(feed, std::vector<graph::ValueRef>{a2, failing}).ok());
  CHECK(instances({a2, c}) == std::vector<int64_t>{4, 2});
}

}  // namespace
}  // namespace mirra::runtime
