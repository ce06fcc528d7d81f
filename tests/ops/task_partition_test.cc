// partition_by_task against the whole graph: a graph over two tasks cut into two parts, run by two
// sessions (one per task) that share an in-process communicator, computes what a plain loop computes,
// step after step; a value read twice in another task crosses once; an update ordered after a reader
// of another task waits for the Send of what it read; a control edge from a task that read nothing is
// refused naming it; a Send or Recv without a peer fails at its deadline naming its group.
#include <future>

#include "ops/task_partition.h"
#include "runtime/collectives/in_process_communicator.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

graph::DeviceId on_task(int task, graph::DeviceKind kind = graph::DeviceKind::cpu) { return {kind, 0, task}; }

TEST_CASE("TaskPartition.two_tasks_compute_what_the_whole_graph_computes") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(on_task(0));
  const auto x = ops::placeholder(b, "x", DType::f32, {-1, 2});
  const auto y = ops::mul(b, x, ops::scalar(b, 2.0f));
  b.set_device(on_task(1));
  const auto z = ops::add(b, y, ops::scalar(b, 1.0f));
  const auto w = ops::mul(b, z, y);
  REQUIRE(b.status().ok());
  const std::string w_name = g.node(w.node).name;

  auto parts = ops::partition_by_task(g, ops::registry());
  REQUIRE_MESSAGE(parts.ok(), parts.status().to_string());
  REQUIRE(parts->size() == 2);
  ops::TaskGraph& first = parts->at(0);
  ops::TaskGraph& second = parts->at(1);
  CHECK(first.sends.size() == 1);  // y, read twice on task 1, crosses once
  int recvs = 0;
  for (const graph::Node& node : second.graph.nodes()) recvs += node.op == "Recv";
  CHECK(recvs == 1);

  auto shared = std::make_shared<runtime::InProcessCommunicator>();
  runtime::Session sender(first.graph, ops::kernels(), {.threads = 1, .communicators = {shared}, .task = 0});
  runtime::Session receiver(second.graph, ops::kernels(), {.threads = 1, .communicators = {shared}, .task = 1});
  const auto w_in_part = second.graph.find(w_name);
  REQUIRE(w_in_part.has_value());
  for (int step = 0; step < 3; ++step) {
    const float v = static_cast<float>(step);
    const Tensor fed = Tensor::from<float>({2, 2}, {v, 1, 2, -3});
    auto sent = std::async(std::launch::async, [&] { return sender.run({{"x", fed}}, {}, first.sends); });
    auto out = receiver.run({}, {{*w_in_part, 0}});
    REQUIRE(sent.get().ok());
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    std::vector<float> want;
    for (float e : fed.to_vector<float>()) want.push_back((2 * e + 1) * (2 * e));
    CHECK((*out)[0].to_vector<float>() == want);
  }
}

// x fed on task 0 (an Identity there), read on task 1 (an Identity there), both on devices of `kind`: its
// bytes, at any dtype.
void check_transfer(DType dtype, graph::DeviceKind kind) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(on_task(0, kind));
  const auto x = ops::placeholder(b, "x", dtype, {3});
  const auto mine = ops::identity(b, x);
  b.set_device(on_task(1, kind));
  const auto y = ops::identity(b, mine);
  REQUIRE(b.status().ok());
  auto parts = ops::partition_by_task(g, ops::registry());
  REQUIRE(parts.ok());
  auto shared = std::make_shared<runtime::InProcessCommunicator>();
  runtime::Session sender(parts->at(0).graph, ops::kernels(), {.threads = 1, .communicators = {shared}, .task = 0});
  runtime::Session receiver(parts->at(1).graph, ops::kernels(), {.threads = 1, .communicators = {shared}, .task = 1});
  runtime::Random rng(3);
  const Tensor fed = random_of(rng, dtype, {3}, -4, 4);
  auto sent = std::async(std::launch::async, [&] { return sender.run({{"x", fed}}, {}, parts->at(0).sends); });
  auto out = receiver.run({}, {{*parts->at(1).graph.find(g.node(y.node).name), 0}});
  REQUIRE(sent.get().ok());
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  check_elements((*out)[0], fed, 0);
}

// The transfer at `dtype` between cpu devices, and between devices of each backend under test
// (conformance: the same bytes arrive).
void check_transfer_everywhere(DType dtype) {
  check_transfer(dtype, graph::DeviceKind::cpu);
  for (graph::DeviceKind kind : backends_under_test()) {
    check_transfer(dtype, kind);
    conformance_checked(kind).insert("Send");
    conformance_checked(kind).insert("Recv");
  }
}

TEST_CASE("TaskPartition.send_and_recv_at_every_dtype") {
  const AttrMap group = {{"group", std::string("g")}};
  sweep_dtypes("Send", [&](DType dtype) { return std::pair{std::vector<graph::TensorType>{{dtype, graph::Shape{3}}}, group}; },
               check_transfer_everywhere);
  sweep_dtypes("Recv", [&](DType dtype) {
    AttrMap attrs = group;
    attrs.set("dtype", dtype);
    attrs.set("shape", graph::Shape{3});
    return std::pair{std::vector<graph::TensorType>{}, attrs};
  }, check_transfer_everywhere);
}

// A variable of task 0 read on task 1, then updated in place on task 0 after its reader (a control
// edge across tasks): the update waits for the variable's Send, so every step task 1 reads the value
// before that step's update.
TEST_CASE("TaskPartition.an_update_after_a_reader_of_another_task_waits_for_what_it_read") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(on_task(0));
  const auto v = ops::variable(b, "v", {2}, ops::Initializer::constant(1.0));
  b.set_device(on_task(1));
  const auto read = ops::identity(b, v);  // forwards v: its reader is the product below
  const auto doubled = ops::mul(b, read, ops::scalar(b, 2.0f));
  b.set_device(on_task(0));
  const graph::NodeId update = ops::assign_add(b, v, ops::fill(b, {2}, 1.0));
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  g.add_control_edge(doubled.node, update);
  REQUIRE(b.status().ok());
  auto parts = ops::partition_by_task(g, ops::registry());
  REQUIRE_MESSAGE(parts.ok(), parts.status().to_string());
  const ops::TaskGraph& owner = parts->at(0);
  REQUIRE(owner.sends.size() == 1);
  const graph::Node& updated = owner.graph.node(*owner.graph.find(g.node(update).name));
  CHECK(updated.control_inputs == std::vector<graph::NodeId>{owner.sends[0]});

  auto shared = std::make_shared<runtime::InProcessCommunicator>();
  runtime::Session holder(owner.graph, ops::kernels(), {.threads = 2, .communicators = {shared}, .task = 0});
  runtime::Session reader(parts->at(1).graph, ops::kernels(), {.threads = 2, .communicators = {shared}, .task = 1});
  const graph::NodeId doubled_there = *parts->at(1).graph.find(g.node(doubled.node).name);
  for (int step = 0; step < 20; ++step) {
    auto updated_step = std::async(std::launch::async, [&] {
      return holder.run({}, {}, {owner.sends[0], *owner.graph.find(g.node(update).name)});
    });
    auto out = reader.run({}, {{doubled_there, 0}});
    REQUIRE(updated_step.get().ok());
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    const float want = 2.0f * static_cast<float>(1 + step);
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{want, want});
  }
}

TEST_CASE("TaskPartition.refuses_order_between_tasks_and_a_lone_half_fails_at_its_deadline") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(on_task(0));
  const auto a = ops::scalar(b, 1.0f);
  b.set_device(on_task(1));
  const auto c = ops::scalar(b, 2.0f);
  g.add_control_edge(a.node, c.node);
  auto parts = ops::partition_by_task(g, ops::registry());
  REQUIRE_FALSE(parts.ok());
  CHECK(parts.status().message().find("a control edge from '" + g.node(a.node).name + "' (task 0)") != std::string::npos);

  graph::Graph lone;
  graph::Builder r(lone, ops::registry());
  const auto received = r.add_value({.op = "Recv",
                                     .attrs = {{"group", std::string("nobody")},
                                               {"dtype", DType::f32},
                                               {"shape", graph::Shape{2}},
                                               {"timeout_ms", int64_t{50}}}});
  REQUIRE(r.status().ok());
  runtime::Session session(lone, ops::kernels());
  auto out = session.run({}, {received});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == graph::StatusCode::deadline_exceeded);
  CHECK(out.status().message().find("'nobody'") != std::string::npos);
  checked_ops().insert("Send");
  checked_ops().insert("Recv");
}

}  // namespace
}  // namespace mirra::test
