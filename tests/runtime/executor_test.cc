// The executor and session: random DAGs (wide, deep, diamond-heavy; 10k+ nodes) give bitwise the same
// results as deterministic mode over many runs; a kernel error in a large graph is reported with node,
// op and device, nothing hangs, and the session works for the next step; feeds are checked; pruning,
// control edges and variables behave (values assigned and read are copies); subnormals are flushed unless the session asks otherwise;
// a kernel that a recorded step cannot hold keeps its steps uncaptured.
#include <doctest/doctest.h>

#include "ops/ops.h"
#include "ops/registry.h"
#include "runtime/random.h"
#include "runtime/session.h"
#include "tests/runtime/test_ops.h"

namespace mirra::runtime {
namespace {

using graph::DType;
using graph::ValueRef;

enum class DagShape { wide, deep, diamond };

struct RandomDag {
  graph::Graph graph;
  std::vector<ValueRef> sinks;
};

// `units` two-node units (a binary op then tanh, so values stay bounded) wired as `shape` says.
RandomDag make_random_dag(DagShape shape, int units, uint64_t seed) {
  RandomDag dag;
  graph::Builder b(dag.graph, ops::registry());
  Random rng(seed);
  std::vector<ValueRef> values;
  std::vector<int> uses;
  auto input = ops::placeholder(b, "input", DType::f32, {-1, 3});
  for (int i = 0; i < 16; ++i) {
    values.push_back(ops::tanh(b, ops::mul(b, input, ops::scalar(b, 0.1f * static_cast<float>(i + 1)))));
    uses.push_back(0);
  }
  const int width = 64;
  for (int u = 0; u < units; ++u) {
    const size_t n = values.size();
    auto pick = [&]() -> size_t {
      switch (shape) {
        case DagShape::wide: return rng.below(std::min<size_t>(n, 200));  // many nodes ready at once
        case DagShape::deep: return n - 1 - rng.below(std::min<size_t>(n, 4));
        case DagShape::diamond: return n - 1 - rng.below(std::min<size_t>(n, width));
      }
      return 0;
    };
    const size_t a = pick(), c = pick();
    ValueRef mixed;
    switch (rng.below(4)) {
      case 0: mixed = ops::add(b, values[a], values[c]); break;
      case 1: mixed = ops::sub(b, values[a], values[c]); break;
      case 2: mixed = ops::mul(b, values[a], values[c]); break;
      default: mixed = ops::maximum(b, values[a], values[c]); break;
    }
    ++uses[a];
    ++uses[c];
    values.push_back(ops::tanh(b, mixed));
    uses.push_back(0);
  }
  MIRRA_CHECK(b.status().ok(), b.status().to_string());
  for (size_t i = 0; i < values.size(); ++i) {
    if (uses[i] == 0) dag.sinks.push_back(values[i]);
  }
  return dag;
}

std::vector<std::vector<float>> run_dag(Session& session, const std::vector<ValueRef>& fetches) {
  auto out = session.run({{"input", Tensor::from<float>({2, 3}, {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f})}},
                         std::span<const ValueRef>(fetches));
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  std::vector<std::vector<float>> values;
  for (const Tensor& t : *out) values.push_back(t.to_vector<float>());
  return values;
}

TEST_CASE("Executor.random_dags.match_deterministic_mode") {
  for (DagShape shape : {DagShape::wide, DagShape::deep, DagShape::diamond}) {
    CAPTURE(static_cast<int>(shape));
    const RandomDag dag = make_random_dag(shape, 5200, 100 + static_cast<uint64_t>(shape));
    REQUIRE(dag.graph.size() > 10000);
    Session reference(dag.graph, ops::kernels(), {.deterministic = true});
    const auto expected = run_dag(reference, dag.sinks);
    Session parallel(dag.graph, ops::kernels(), {.threads = 4});
    for (int run = 0; run < 12; ++run) {
      CAPTURE(run);
      REQUIRE(run_dag(parallel, dag.sinks) == expected);
    }
  }
}

// The same DAGs spread over two asynchronous devices and the host (every node on a stream, copies
// between them), run in parallel and deterministically.
TEST_CASE("Executor.random_dags.on_cpu_async_devices_match_the_cpu") {
  for (DagShape shape : {DagShape::wide, DagShape::diamond}) {
    CAPTURE(static_cast<int>(shape));
    RandomDag dag = make_random_dag(shape, 1500, 200 + static_cast<uint64_t>(shape));
    Session reference(dag.graph, ops::kernels(), {.deterministic = true});
    const auto expected = run_dag(reference, dag.sinks);
    for (graph::NodeId id = 0; id < dag.graph.size(); ++id) {
      if (id % 3 != 2) dag.graph.mutable_node(id).device = graph::DeviceId{graph::DeviceKind::cpu_async, static_cast<int>(id % 3)};
    }
    for (bool deterministic : {false, true}) {
      Session devices(dag.graph, ops::kernels(), {.threads = 4, .deterministic = deterministic});
      for (int run = 0; run < 3; ++run) {
        CAPTURE(run);
        REQUIRE(run_dag(devices, dag.sinks) == expected);
      }
    }
  }
}

TEST_CASE("Executor.kernel_error_in_a_large_graph.is_reported_and_the_session_recovers") {
  RandomDag dag = make_random_dag(DagShape::diamond, 5000, 7);
  graph::Builder b(dag.graph, ops::registry());
  // A reshape that only fails at run time, deep inside the graph's dependencies.
  auto features = ops::placeholder(b, "features", DType::f32, {-1});
  auto reshaped = ops::reshape(b, features, {-1, 4});
  auto total = ops::reduce_sum(b, reshaped);
  REQUIRE(b.status().ok());
  std::vector<ValueRef> fetches = dag.sinks;
  fetches.push_back(total);
  Session session(dag.graph, ops::kernels(), {.threads = 2});
  const Tensor input = Tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto bad = session.run({{"input", input}, {"features", Tensor::from<float>({6}, {1, 2, 3, 4, 5, 6})}},
                           std::span<const ValueRef>(fetches));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message() == "node 'Reshape' (Reshape) on cpu:0: cannot reshape f32[6] to [-1,4]");
    auto good = session.run({{"input", input}, {"features", Tensor::from<float>({8}, {1, 2, 3, 4, 5, 6, 7, 8})}},
                            std::span<const ValueRef>(fetches));
    REQUIRE(good.ok());
    CHECK(good->back().to_vector<float>() == std::vector<float>{36});
  }
}

TEST_CASE("Session.feeds.are_checked_by_name_dtype_and_shape") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 2});
  auto y = ops::relu(b, x);
  Session session(g, ops::kernels());
  CHECK(session.run({{"z", Tensor::from<float>({1, 2}, {1, 2})}}, {y}).status().message() ==
        "feed 'z': the graph has no node with that name");
  CHECK(session.run({{"x", Tensor::from<int32_t>({1, 2}, {1, 2})}}, {y}).status().message() ==
        "feed 'x': expected f32[?,2], got i32[1,2]");
  CHECK(session.run({{"x", Tensor::from<float>({1, 3}, {1, 2, 3})}}, {y}).status().message() ==
        "feed 'x': expected f32[?,2], got f32[1,3]");
  CHECK(session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {y}).status().message() ==
        "feed 'x': expected f32[?,2], got f32[2]");
  CHECK(session.run({{"x", Tensor()}}, {y}).status().message() == "feed 'x': the tensor is empty");
  auto ok = session.run({{"x", Tensor::from<float>({0, 2}, {})}}, {y});
  REQUIRE(ok.ok());
  CHECK((*ok)[0].type_string() == "f32[0,2]");
}

TEST_CASE("Session.runs_only_what_the_fetches_need") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  auto unfed = ops::placeholder(b, "unfed", DType::f32, {2});
  auto needed = ops::neg(b, x);
  (void)ops::add(b, needed, unfed);  // not fetched, so `unfed` need not be fed
  Session session(g, ops::kernels());
  auto out = session.run({{"x", Tensor::from<float>({2}, {1, -2})}}, {needed});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{-1, 2});
  // Feeding an intermediate node cuts the graph there.
  auto cut = session.run({{"Neg", Tensor::from<float>({2}, {5, 6})}}, {needed});
  REQUIRE(cut.ok());
  CHECK((*cut)[0].to_vector<float>() == std::vector<float>{5, 6});
}

TEST_CASE("Session.variables.keep_their_values_across_steps") {
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 3);
  auto w = ops::variable(b, "w", {2, 2}, ops::Initializer::glorot_uniform());
  auto doubled = ops::add(b, w, w);
  Session session(g, ops::kernels());
  auto first = session.run({}, {w, doubled});
  REQUIRE(first.ok());
  auto second = session.run({}, {w});
  REQUIRE(second.ok());
  CHECK((*first)[0].to_vector<float>() == (*second)[0].to_vector<float>());
  session.variables().set("w", Tensor::from<float>({2, 2}, {1, 2, 3, 4}));
  auto third = session.run({}, {doubled});
  REQUIRE(third.ok());
  CHECK((*third)[0].to_vector<float>() == std::vector<float>{2, 4, 6, 8});
}

// A value assigned or read is the caller's: the updates of later steps write the variable's own buffer.
TEST_CASE("Session.variables.assigned_and_read_values_are_copies") {
  for (const graph::DeviceKind kind : {graph::DeviceKind::cpu, graph::DeviceKind::cpu_async}) {
    CAPTURE(graph::device_kind_name(kind));
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    auto w = ops::variable(b, "w", {2}, ops::Initializer::zeros());
    const graph::NodeId add = ops::assign_add(b, w, ops::constant<float>(b, {2}, std::vector<float>{1, 1}));
    REQUIRE(b.status().ok());
    Session session(g, ops::kernels(), {.default_device = {kind, 0}});
    const Tensor assigned = Tensor::from<float>({2}, {3, 4});
    session.assign_variable("w", assigned);
    REQUIRE(session.run({}, {}, {add}).ok());
    const Tensor read = *session.read_variable("w");
    REQUIRE(session.run({}, {}, {add}).ok());
    CHECK(assigned.to_vector<float>() == std::vector<float>{3, 4});
    CHECK(read.to_vector<float>() == std::vector<float>{4, 5});
    CHECK(session.read_variable("w")->to_vector<float>() == std::vector<float>{5, 6});
  }
}

TEST_CASE("Session.control_edges.order_nodes_and_targets_run_without_fetches") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto w = ops::variable(b, "w", {1}, ops::Initializer::constant(1.0));
  auto first = ops::identity(b, w);
  const graph::NodeId target = b.add({.op = "Identity", .inputs = {w}, .name = "after", .control_inputs = {first.node}});
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels(), {.deterministic = true});
  REQUIRE(session.run({}, std::span<const ValueRef>(), std::vector<graph::NodeId>{target}).ok());
  REQUIRE(session.variables().find("w").has_value());
}

TEST_CASE("Session.nodes_on_other_cpu_devices.use_their_own_allocators") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {3});
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu, 1});
  auto y = ops::square(b, x);
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu, 2});
  auto z = ops::neg(b, y);
  Session session(g, ops::kernels());
  REQUIRE(session.devices().devices().size() == 3);
  auto out = session.run({{"x", Tensor::from<float>({3}, {1, 2, 3})}}, {z});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{-1, -4, -9});
  CHECK((*out)[0].buffer() != nullptr);
  CHECK(session.devices().find({graph::DeviceKind::cpu, 1})->allocator()->stats().allocations >= 1);
  CHECK(session.devices().find({graph::DeviceKind::cpu, 2})->allocator()->stats().allocations >= 1);
  CHECK(session.devices().find({graph::DeviceKind::cpu, 0})->allocator()->stats().allocations == 0);
}

// Subnormal inputs read as zero and subnormal results are written as zero on every thread of the
// step (a large product runs as a parallel loop), unless flush_denormals is off.
TEST_CASE("Session.flush_denormals.zeroes_subnormals_on_every_thread") {
  constexpr int64_t n = 1 << 20;
  const float subnormal = 1e-39f;  // below 2^-126 (about 1.18e-38)
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", graph::DType::f32, {n});
  // x * 1 reads a subnormal; (x * 0 + 2e-38) * 0.5 makes one (1e-38) from normal values.
  auto read = ops::mul(b, x, ops::scalar(b, 1.0f));
  auto written = ops::mul(b, ops::add(b, ops::mul(b, x, ops::scalar(b, 0.0f)), ops::scalar(b, 2e-38f)), ops::scalar(b, 0.5f));
  REQUIRE(b.status().ok());
  const Tensor fed = Tensor::from<float>({n}, std::span<const float>(std::vector<float>(n, subnormal)));
  for (bool flush : {true, false}) {
    CAPTURE(flush);
    Session session(g, ops::kernels(), {.threads = 2, .flush_denormals = flush});
    auto out = session.run({{"x", fed}}, {read, written});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    const std::vector<float> r = (*out)[0].to_vector<float>(), w = (*out)[1].to_vector<float>();
    const auto all = [](const std::vector<float>& v, float value) {
      return std::all_of(v.begin(), v.end(), [value](float e) { return e == value; });
    };
    CHECK(all(r, flush ? 0.0f : subnormal));
    CHECK(all(w, flush ? 0.0f : 1e-38f));
  }
}

// A session is one task: devices named with its task are its own, a node on another task's device
// is refused naming it.
TEST_CASE("Session.devices_of_its_task_are_its_own_and_other_tasks_are_refused") {
  for (const int task : {0, 3}) {
    CAPTURE(task);
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    b.set_device(graph::DeviceId{graph::DeviceKind::cpu_async, 0, task});
    auto x = ops::placeholder(b, "x", DType::f32, {2});
    b.set_device(graph::DeviceId{graph::DeviceKind::cpu_async, 0});
    auto y = ops::neg(b, ops::neg(b, x));  // the same device, named without the task
    REQUIRE(b.status().ok());
    Session session(g, ops::kernels(), {.task = task});
    CHECK(session.devices().devices().size() == 2);  // cpu_async:0 and the default cpu:0
    auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {y});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{1, 2});
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu, 0, 1});
  auto y = b.add_value({.op = "Neg", .inputs = {x}, .name = "elsewhere"});
  REQUIRE(b.status().ok());
  Session session(g, ops::kernels());
  auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {y});
  CHECK(out.status().message() ==
        "node 'elsewhere' is placed on /task:1/cpu:0, a device of task 1 (another process): values do not cross between "
        "tasks yet");
  // A default device of another task is refused the same way, for the nodes that take it.
  graph::Graph unplaced;
  graph::Builder u(unplaced, ops::registry());
  auto z = ops::placeholder(u, "z", DType::f32, {2});
  REQUIRE(u.status().ok());
  Session elsewhere(unplaced, ops::kernels(), {.default_device = graph::DeviceId{graph::DeviceKind::cpu, 0, 1}});
  CHECK(elsewhere.run({{"z", Tensor::from<float>({2}, {1, 2})}}, {z}).status().message().find(
            "is placed on /task:1/cpu:0, a device of task 1") != std::string::npos);
}

// A kernel that a recorded step cannot hold (KernelDef::not_capturable: NCCL's collectives, a GPU's
// CheckNumerics) keeps its steps from being captured, and the refusal names the node and the reason.
TEST_CASE("Session.a_kernel_that_cannot_be_recorded.keeps_its_steps_uncaptured_and_says_why") {
  static const struct Tables : TestOps {
    Tables() {
      add({.name = "TestNotRecorded", .inputs = {"x"}, .infer = infers_input_type()},
          {.fn = [](KernelContext& ctx) {
             ctx.set_output(0, ctx.input(0));
             return Status();
           },
           .not_capturable = "meets its peers with no deadline in replays"},
          {graph::DeviceKind::cpu_async});
    }
  } tables;
  graph::Graph g;
  graph::Builder b(g, tables.schemas);
  b.set_device(graph::DeviceId{graph::DeviceKind::cpu_async, 0});
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  auto y = ops::neg(b, b.add_value({.op = "TestNotRecorded", .inputs = {ops::neg(b, x)}, .name = "meets"}));
  REQUIRE(b.status().ok());
  Session session(g, tables.kernels, {.capture_steps = true});
  for (int step = 0; step < 3; ++step) {
    auto out = session.run({{"x", Tensor::from<float>({2}, {1, 2})}}, {y});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{1, 2});
  }
  CHECK(session.replayed_steps() == 0);
  const std::vector<std::string> refusals = session.capture_refusals();
  REQUIRE(refusals.size() == 1);
  CHECK(refusals[0].find("node 'meets' (TestNotRecorded) on cpu_async:0 meets its peers with no deadline in replays") !=
        std::string::npos);
}

}  // namespace
}  // namespace mirra::runtime
