// The simulator's parts against answers worked out by hand: the cluster file (units, a per-device
// network, every error naming its key); the alpha-beta costs of ring, tree and hierarchical
// all-reduces against their closed forms; the event simulation on hand-made steps (a kernel that
// waits for a collective, the channel's fixed order, exposed communication); one replica's step of a
// graph with its kernels' roofline times and its collectives' bytes, or its kernels' times measured
// in a trace; the sweep's efficiency.
#include <doctest/doctest.h>

#include <cmath>

#include "graph/builder.h"
#include "ops/ops.h"
#include "simulate/cluster.h"
#include "simulate/collective_cost.h"
#include "simulate/measured_costs.h"
#include "simulate/scaling.h"
#include "simulate/scaling_plot.h"
#include "simulate/step_graph.h"
#include "simulate/step_simulation.h"

namespace mirra::simulate {
namespace {

const char* const kTwoNodes = R"({
  "name": "two nodes", "nodes": 2, "devices_per_node": 4,
  "device": {"name": "gpu", "tflops": {"f32": 10, "bf16": 40}, "memory_bandwidth_gb_s": 1000,
             "compute_efficiency": 0.5, "memory_efficiency": 0.8, "kernel_overhead_us": 5},
  "intra_node": {"bandwidth_gb_s": 100, "latency_us": 2},
  "inter_node": {"bandwidth_gbit_s": 80, "per": "node", "latency_us": 10},
  "sources": {"device.tflops": "made up for a test"}
})";

ClusterSpec two_nodes() {
  auto cluster = parse_cluster(kTwoNodes, "two.json");
  REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
  return *cluster;
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)); }

TEST_CASE("Cluster.a_file_reads_in_seconds_and_bytes_and_errors_name_the_key") {
  const ClusterSpec c = two_nodes();
  CHECK(c.devices() == 8);
  CHECK(c.device.flops.at(graph::DType::bf16) == 40e12);
  CHECK(c.device.achieved_flops(graph::DType::f32) == 5e12);
  CHECK(c.device.achieved_flops(graph::DType::f16) == 5e12);  // not listed: f32's
  CHECK(c.device.kernel_overhead == doctest::Approx(5e-6));
  CHECK(c.intra_node.bandwidth == 100e9);
  CHECK(c.inter_node.bandwidth == 10e9);  // 80 Gbit/s
  CHECK(c.inter_node.latency == doctest::Approx(10e-6));
  CHECK(c.sources.at("device.tflops") == "made up for a test");

  std::string per_device = kTwoNodes;
  per_device.replace(per_device.find("\"node\""), 6, "\"device\"");
  CHECK(parse_cluster(per_device, "d.json")->inter_node.bandwidth == 40e9);  // 4 devices x 10 GB/s

  const auto error = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return parse_cluster(text, "c.json").status().message();
  };
  CHECK(error(kTwoNodes, "\"devices_per_node\"", "\"devices_per_nod\"") ==
        "c.json: 'devices_per_nod' is not a key of a cluster file (docs/simulate.md)");
  CHECK(error(kTwoNodes, "{\"f32\": 10, ", "{") == "c.json: 'device.tflops.f32' is missing");
  CHECK(error(kTwoNodes, "\"latency_us\": 2", "\"latency_us\": -2") == "c.json: 'intra_node.latency_us' must be a number >= 0");
  CHECK(error(kTwoNodes, "\"per\": \"node\"", "\"per\": \"rack\"") ==
        "c.json: 'inter_node.per' must be \"node\" or \"device\", not \"rack\"");
  CHECK(error(kTwoNodes, "\"bandwidth_gb_s\": 100", "\"bandwidth_gb_s\": 100, \"bandwidth_gbit_s\": 800") ==
        "c.json: 'intra_node.bandwidth_gb_s' or 'intra_node.bandwidth_gbit_s' must be given, one of them");
  CHECK(error(kTwoNodes, "\"nodes\": 2", "\"nodes\": 2.5") == "c.json: 'nodes' must be a whole number up to 65536");
  CHECK(error(kTwoNodes, "\"compute_efficiency\": 0.5", "\"compute_efficiency\": 2") ==
        "c.json: 'device.compute_efficiency' must be at most 1");
  CHECK(parse_cluster("[1]", "c.json").status().message() == "c.json: must be a JSON object");
  CHECK(error(kTwoNodes, "{\"bandwidth_gb_s\": 100, \"latency_us\": 2}", "3") == "c.json: 'intra_node' must be a JSON object");
  CHECK(parse_cluster("{", "c.json").status().message() == "c.json: not valid JSON");
  CHECK(read_cluster("/nonexistent/c.json").status().message() ==
        "cannot read cluster file '/nonexistent/c.json': No such file or directory");
}

TEST_CASE("CollectiveCost.each_algorithm_matches_its_closed_form") {
  const ClusterSpec c = two_nodes();
  const double n = 64e6;
  const double ai = 2e-6, bi = 100e9, ae = 10e-6, be = 10e9;  // per direction; the network per node
  const auto all_reduce = [&](Algorithm a, int p) { return collective_seconds(CollectiveKind::all_reduce, a, n, p, c); };
  for (Algorithm a : all_algorithms()) CHECK(all_reduce(a, 1) == 0);

  // Within a node every algorithm sums over the node's link.
  CHECK(near(all_reduce(Algorithm::ring, 4), 2 * 3 * (ai + n / 4 / bi)));
  CHECK(near(all_reduce(Algorithm::hierarchical, 4), 2 * 3 * (ai + n / 4 / bi)));
  CHECK(near(all_reduce(Algorithm::tree, 4), 2 * ((ai + n / 2 / bi) + (ai + n / 4 / bi))));
  // Three devices: recursive halving over two, the third handing its whole buffer over first.
  CHECK(near(all_reduce(Algorithm::tree, 3), 2 * ((ai + n / 2 / bi) + (ai + n / bi))));

  // Across the two nodes: the ring's every step waits for the network at the node's bandwidth.
  CHECK(near(all_reduce(Algorithm::ring, 8), 2 * 7 * (ae + n / 8 / be)));
  // Halving at distance 1 and 2 within the node; at 4 across, the node's 4 devices sharing its network.
  CHECK(near(all_reduce(Algorithm::tree, 8), 2 * ((ai + n / 2 / bi) + (ai + n / 4 / bi) + (ae + n / 8 / (be / 4)))));
  // Reduce-scatter in the node, each device's quarter all-reduced between the nodes, all-gather.
  CHECK(near(all_reduce(Algorithm::hierarchical, 8), 2 * (3 * (ai + n / 4 / bi) + 1 * (ae + n / 4 / 2 / (be / 4)))));

  for (Algorithm a : all_algorithms()) {
    const double whole = all_reduce(a, 8);
    CHECK(near(collective_seconds(CollectiveKind::reduce_scatter, a, n, 8, c), whole / 2));
    CHECK(near(collective_seconds(CollectiveKind::all_gather, a, n, 8, c), whole / 2));
  }
  CHECK(all_reduce_bus_bandwidth(1e9, 8, 1) == doctest::Approx(1.75e9));
  CHECK(algorithm_from_name("tree").value() == Algorithm::tree);
  CHECK(algorithm_from_name("butterfly").status().message() == "unknown all-reduce algorithm 'butterfly' (ring, tree or hierarchical)");
}

StepNode kernel(const char* name, double seconds, std::vector<size_t> inputs) {
  return {.name = name, .op = "K", .seconds = seconds, .inputs = std::move(inputs)};
}
StepNode collective(const char* name, double bytes, std::vector<size_t> inputs) {
  return {.name = name, .op = "AllReduce", .collective = true, .bytes = bytes, .inputs = std::move(inputs)};
}

// A forward kernel, two backward ones each followed by its gradient's all-reduce and update: the
// channel works beside the second backward kernel, the first update waits for its all-reduce, and
// the second all-reduce is what the step waits for at its end.
TEST_CASE("StepSimulation.collectives_overlap_the_kernels_that_do_not_wait_for_them") {
  StepGraph step;
  step.nodes = {kernel("forward", 1, {}),          // 0
                kernel("backward_1", 1, {0}),      // 1
                collective("bucket_1", 3, {1}),    // 2: 1.5 s
                kernel("update_1", 0.5, {2}),      // 3
                kernel("backward_2", 2, {1}),      // 4
                collective("bucket_2", 2, {4, 2}), // 5: 1 s, after bucket_1 in the collective order
                kernel("update_2", 0.5, {5})};     // 6
  const auto times = simulate_step(step, [](const StepNode& c) { return c.bytes / 2; });
  REQUIRE(times.ok());
  // forward 0-1, backward_1 1-2, bucket_1 2-3.5; backward_2 2-4 (update_1, first in order, is not
  // ready yet); update_1 4-4.5; bucket_2 4-5; update_2 5-5.5.
  CHECK(times->step == 5.5);
  CHECK(times->compute == 5);
  CHECK(times->communication == 2.5);
  CHECK(times->exposed_communication == 0.5);

  // Free collectives: the kernels alone, one after another.
  const auto alone = simulate_step(step, [](const StepNode&) { return 0.0; });
  CHECK(alone->step == 5);
  CHECK(alone->exposed_communication == 0);

  // A channel slower than everything: the step is the last all-reduce's end.
  const auto slow = simulate_step(step, [](const StepNode& c) { return c.bytes * 10; });
  CHECK(slow->step == 2 + 30 + 20 + 0.5);

  StepGraph broken;
  broken.nodes = {kernel("a", 1, {1}), kernel("b", 1, {})};
  CHECK(simulate_step(broken, [](const StepNode&) { return 0.0; }).status().message() ==
        "simulate: 'a' waits for a node that is not before it");
}

// Two replicas, the second slower: the all-reduce starts when the second's gradient is ready, and
// device 0 waits for it. A device with two lanes runs two independent kernels at once.
TEST_CASE("StepSimulation.the_slowest_replica_sets_the_pace_and_lanes_run_kernels_at_once") {
  const auto on = [](StepNode node, int device) {
    node.device = device;
    return node;
  };
  StepGraph step;
  step.devices = 2;
  step.nodes = {on(kernel("backward_0", 1, {}), 0),      // 0
                on(kernel("backward_1", 3, {}), 1),      // 1
                collective("bucket", 2, {0, 1}),         // 2: 1 s, from 3 s
                on(kernel("update_0", 0.5, {2}), 0),     // 3
                on(kernel("update_1", 0.5, {2}), 1)};    // 4
  const auto times = simulate_step(step, [](const StepNode& c) { return c.bytes / 2; });
  REQUIRE(times.ok());
  CHECK(times->step == 4.5);
  CHECK(times->compute == 1.5);                 // device 0's
  CHECK(times->exposed_communication == 3);     // waiting for replica 1, then the all-reduce

  StepGraph wide;
  wide.lanes = 2;
  wide.nodes = {kernel("a", 2, {}), kernel("b", 1, {}), kernel("c", 1, {0, 1}), kernel("d", 1, {})};
  const auto both = simulate_step(wide, [](const StepNode&) { return 0.0; });
  REQUIRE(both.ok());
  // a 0-2 and b 0-1 at once; d 1-2 on b's lane; c 2-3.
  CHECK(both->step == 3);
  CHECK(both->compute == 3);

  StepGraph stray;
  stray.nodes = {on(kernel("a", 1, {}), 1)};
  CHECK(simulate_step(stray, [](const StepNode&) { return 0.0; }).status().message() ==
        "simulate: 'a' runs on a device the step does not have");
}

// Two replicas' kernels and one all-reduce group of two ranks: the group is one node that waits for
// both replicas' gradients and carries one rank's bytes; the updates wait for it.
TEST_CASE("StepGraph.a_collective_group_is_one_node_that_waits_for_every_replica") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const graph::DeviceId devices[] = {{graph::DeviceKind::cpu_async, 0}, {graph::DeviceKind::cpu_async, 1}};
  std::vector<graph::ValueRef> gradients, sums;
  for (int64_t r = 0; r < 2; ++r) {
    b.set_device(devices[r]);
    auto scope = b.scope("replica_" + std::to_string(r));
    const auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 64});
    const auto w = ops::variable(b, "w", {64, 32});
    gradients.push_back(ops::matmul(b, x, w));
  }
  for (int64_t r = 0; r < 2; ++r) {
    b.set_device(devices[r]);
    sums.push_back(b.add_value({.op = "AllReduce",
                                .inputs = {gradients[static_cast<size_t>(r)]},
                                .attrs = {{"group", std::string("bucket_0")}, {"rank", r}, {"ranks", int64_t{2}}}}));
  }
  std::vector<graph::NodeId> roots;
  for (const auto& sum : sums) roots.push_back(ops::relu(b, sum).node);
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  const ClusterSpec c = two_nodes();
  const auto step = step_graph(g, roots, {.batch_size = 16, .schemas = &ops::registry()}, devices, c.device);
  REQUIRE_MESSAGE(step.ok(), step.status().to_string());
  CHECK(step->devices == 2);
  std::vector<const StepNode*> collectives, products, relus;
  for (const StepNode& node : step->nodes) {
    if (node.collective) collectives.push_back(&node);
    if (node.op == "MatMul") products.push_back(&node);
    if (node.op == "Relu") relus.push_back(&node);
  }
  REQUIRE(collectives.size() == 1);
  CHECK(collectives[0]->name == "bucket_0");
  CHECK(collectives[0]->bytes == 16 * 32 * 4);
  REQUIRE(products.size() == 2);
  CHECK(products[0]->device != products[1]->device);
  const size_t bucket = static_cast<size_t>(collectives[0] - step->nodes.data());
  CHECK(collectives[0]->inputs.size() == 2);  // both products
  for (const StepNode* relu : relus) CHECK(relu->inputs == std::vector<size_t>{bucket});

  // A collective the cost model does not know is named, not timed as a kernel.
  graph::Graph other;
  graph::Builder ob(other, ops::registry());
  ob.set_device(devices[0]);
  const auto sent = ops::broadcast(ob, ops::variable(ob, "w", {4}), {.group = "state", .rank = 0, .ranks = 2}, 0);
  REQUIRE_MESSAGE(ob.status().ok(), ob.status().to_string());
  const std::vector<graph::NodeId> broadcast_root = {sent.node};
  CHECK(step_graph(other, broadcast_root, {.batch_size = 16, .schemas = &ops::registry()}, devices, c.device).status().message() ==
        "simulate: '" + other.node(sent.node).name + "' is a Broadcast, a collective whose cost is not modelled (AllReduce, "
        "ReduceScatter and AllGather are)");
}

// A dense layer's product and its all-reduce on replica 0's device: the product's time is its
// FLOPs at the device's achieved rate, the all-reduce brings the gradient's bytes; nodes on another
// device are left out.
TEST_CASE("StepGraph.one_replica's_kernels_are_timed_by_their_roofline_and_its_collectives_carry_their_bytes") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const graph::DeviceId replica{graph::DeviceKind::cpu_async, 0}, other{graph::DeviceKind::cpu_async, 1};
  b.set_device(replica);
  const auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 256});
  const auto w = ops::variable(b, "w", {256, 128});
  const auto y = ops::matmul(b, x, w);
  const auto summed = b.add_value({.op = "AllReduce",
                                   .inputs = {w},
                                   .attrs = {{"group", std::string("bucket_0")}, {"rank", int64_t{0}}, {"ranks", int64_t{2}}}});
  b.set_device(other);
  const auto elsewhere = ops::relu(b, y);
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  const ClusterSpec c = two_nodes();
  const std::vector<graph::NodeId> roots = {summed.node, elsewhere.node, y.node};
  const graph::DeviceId replicas[] = {replica};
  const auto step = step_graph(g, roots, {.batch_size = 64, .schemas = &ops::registry()}, replicas, c.device);
  REQUIRE_MESSAGE(step.ok(), step.status().to_string());
  std::map<std::string, const StepNode*> by_op;
  for (const StepNode& node : step->nodes) by_op[node.op] = &node;
  CHECK_FALSE(by_op.contains("Relu"));
  REQUIRE(by_op.contains("MatMul"));
  const double flops = 2.0 * 64 * 256 * 128, bytes = 4.0 * (64 * 256 + 256 * 128 + 64 * 128);
  CHECK(by_op["MatMul"]->seconds ==
        doctest::Approx(std::max(flops / 5e12, bytes / (1000e9 * 0.8)) + 5e-6));
  CHECK(by_op["Variable"]->seconds == 0);  // a source moves nothing
  REQUIRE(by_op.contains("AllReduce"));
  CHECK(by_op["AllReduce"]->collective);
  CHECK(by_op["AllReduce"]->bytes == 256 * 128 * 4);
}

// A trace as mirra train --trace writes it: tracks named by metadata events, two steps, kernels on a
// device's compute track and its copies track, a collective and a wait (neither a kernel's time).
const char* const kTrace = R"({"displayTimeUnit": "ms", "traceEvents": [
  {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "steps"}},
  {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "device cpu:0"}},
  {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "device cpu:0 communication"}},
  {"ph": "M", "pid": 1, "tid": 4, "name": "thread_name", "args": {"name": "device cpu:0 copies"}},
  {"ph": "X", "pid": 1, "tid": 1, "name": "step 0", "cat": "step", "ts": 0, "dur": 5000},
  {"ph": "X", "pid": 1, "tid": 2, "name": "replica_0/dense/MatMul", "cat": "kernel", "ts": 10, "dur": 4000},
  {"ph": "X", "pid": 1, "tid": 1, "name": "step 1", "cat": "step", "ts": 6000, "dur": 1000},
  {"ph": "X", "pid": 1, "tid": 2, "name": "replica_0/dense/MatMul", "cat": "kernel", "ts": 6000, "dur": 300},
  {"ph": "X", "pid": 1, "tid": 2, "name": "replica_0/relu", "cat": "kernel", "ts": 6304, "dur": 50},
  {"ph": "X", "pid": 1, "tid": 2, "name": "wait", "cat": "wait", "ts": 6354, "dur": 100},
  {"ph": "X", "pid": 1, "tid": 2, "name": "replica_0/loss", "cat": "kernel", "ts": 6454, "dur": 10},
  {"ph": "X", "pid": 1, "tid": 3, "name": "bucket_0", "cat": "collective", "ts": 6360, "dur": 90},
  {"ph": "X", "pid": 1, "tid": 4, "name": "replica_0/copy", "cat": "kernel", "ts": 6400, "dur": 7},
  {"ph": "X", "pid": 1, "tid": 1, "name": "step 2", "cat": "step", "ts": 8000, "dur": 2000},
  {"ph": "X", "pid": 1, "tid": 2, "name": "replica_0/dense/MatMul", "cat": "kernel", "ts": 8000, "dur": 500},
  {"ph": "X", "pid": 1, "tid": 2, "name": "replica_0/relu", "cat": "kernel", "ts": 8506, "dur": 70}
]})";

// The median of each node's kernel times over the steps after the first; the executor's time between
// kernels from the short gaps of the compute track (4 and 6 us; the 100 us wait is not one).
TEST_CASE("MeasuredCosts.a_trace_gives_each_kernel's_median_time_after_the_first_step_and_its_twins'") {
  const auto costs = parse_measured_costs(kTrace, "run.json");
  REQUIRE_MESSAGE(costs.ok(), costs.status().to_string());
  CHECK(costs->steps == 2);
  CHECK(costs->step_seconds == doctest::Approx(1.5e-3));
  CHECK(costs->kernel_seconds.at("replica_0/dense/MatMul") == doctest::Approx(500e-6));  // of 300 and 500 us: the upper
  CHECK(costs->kernel_seconds.at("replica_0/relu") == doctest::Approx(70e-6));
  CHECK(costs->kernel_seconds.at("replica_0/copy") == doctest::Approx(7e-6));
  CHECK_FALSE(costs->kernel_seconds.contains("bucket_0"));
  CHECK_FALSE(costs->kernel_seconds.contains("wait"));
  CHECK(costs->dispatch_seconds == doctest::Approx(6e-6));
  // A replica the trace did not time (another worker's) takes its twins' times; other nodes none.
  CHECK(*measured_kernel_seconds(*costs, "replica_0/relu") == doctest::Approx(70e-6));
  CHECK(*measured_kernel_seconds(*costs, "replica_3/relu") == doctest::Approx(70e-6));
  CHECK(*measured_kernel_seconds(*costs, "replica_1/dense/MatMul") == doctest::Approx(500e-6));
  CHECK(measured_kernel_seconds(*costs, "replica_1/dense/BiasAdd") == nullptr);
  CHECK(parse_measured_costs("{\"traceEvents\": []}", "t.json").status().message() ==
        "t.json: the trace records no step (no \"steps\" track)");
  CHECK(parse_measured_costs("[]", "t.json").status().message() ==
        "t.json: not a Chrome trace (a JSON object with traceEvents) as mirra train --trace writes");
  CHECK(read_measured_costs("/nonexistent/t.json").status().message() ==
        "cannot read trace '/nonexistent/t.json': No such file or directory");
}

// With measured costs, a kernel the trace timed takes that time and the executor's time per kernel;
// one it did not time keeps its roofline.
TEST_CASE("StepGraph.kernels_a_trace_timed_take_their_measured_time") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const graph::DeviceId replica{graph::DeviceKind::cpu_async, 0};
  b.set_device(replica);
  const auto x = ops::placeholder(b, "x", graph::DType::f32, {-1, 256});
  const auto w = ops::variable(b, "w", {256, 128});
  const auto y = ops::matmul(b, x, w);
  const auto r = ops::relu(b, y);
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  const ClusterSpec c = two_nodes();
  const MeasuredCosts measured{.kernel_seconds = {{g.node(y.node).name, 2e-3}}, .dispatch_seconds = 1e-6};
  const std::vector<graph::NodeId> roots = {r.node};
  const graph::DeviceId replicas[] = {replica};
  const auto step = step_graph(g, roots, {.batch_size = 64, .schemas = &ops::registry()}, replicas, c.device, &measured);
  REQUIRE_MESSAGE(step.ok(), step.status().to_string());
  std::map<std::string, const StepNode*> by_op;
  for (const StepNode& node : step->nodes) by_op[node.op] = &node;
  CHECK(by_op.at("MatMul")->seconds == doctest::Approx(2e-3 + 1e-6));
  const double relu_bytes = 4.0 * 2 * 64 * 128;
  CHECK(by_op.at("Relu")->seconds == doctest::Approx(relu_bytes / (1000e9 * 0.8) + 5e-6));
  CHECK(step->measured_kernels == 1);
  CHECK(step->roofline_kernels == static_cast<int64_t>(step->nodes.size()) - 1);
}

// Every op whose operands are a product's states what it costs (the element-wise default would count
// one operation per output), and a convolution's rule counts each output's window.
TEST_CASE("OpCost.every_product_states_its_cost") {
  for (const std::string& name : ops::registry().names()) {
    const graph::OpSchema& schema = *ops::registry().find(name);
    CAPTURE(name);
    if (schema.product_operands > 0) CHECK(static_cast<bool>(schema.cost));
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto x = ops::placeholder(b, "x", graph::DType::f32, {2, 9, 9, 3});
  const auto filter = ops::variable(b, "filter", {3, 3, 3, 8});
  const auto y = ops::conv2d(b, x, filter, {.strides = {2, 2}, .padding = "SAME"});
  REQUIRE(b.status().ok());
  const graph::Node& conv = g.node(y.node);
  const std::vector<graph::TensorType> inputs = {g.type(x), g.type(filter)};
  const graph::OpCost cost = graph::op_cost(*ops::registry().find("Conv2D"), {.node = conv, .inputs = inputs, .outputs = conv.outputs});
  CHECK(cost.flops == 2.0 * (2 * 5 * 5 * 8) * (3 * 3 * 3));
  CHECK(cost.bytes == 4.0 * (2 * 9 * 9 * 3 + 3 * 3 * 3 * 8 + 2 * 5 * 5 * 8));
  const graph::OpCost relu = graph::op_cost(*ops::registry().find("Relu"), {.node = conv, .inputs = conv.outputs, .outputs = conv.outputs});
  CHECK(relu.flops == 2 * 5 * 5 * 8);
}

TEST_CASE("Scaling.efficiency_is_the_one_device_step_over_the_step_on_p_devices") {
  const ClusterSpec c = two_nodes();
  CHECK(device_counts(c) == std::vector<int>{1, 2, 4, 8});
  StepGraph step;
  step.nodes = {kernel("backward", 0.01, {}), collective("bucket", 256e6, {0}), kernel("update", 0.001, {1})};
  const auto points = scaling_sweep(step, c, {1, 8}, {Algorithm::ring, Algorithm::hierarchical}, 32);
  REQUIRE(points.ok());
  REQUIRE(points->size() == 4);
  CHECK((*points)[0].efficiency == 1);
  CHECK((*points)[0].examples_per_second == doctest::Approx(32 / 0.011));
  const ScalingPoint& ring = (*points)[2];
  CHECK(ring.devices == 8);
  const double seconds = 0.011 + collective_seconds(CollectiveKind::all_reduce, Algorithm::ring, 256e6, 8, c);
  CHECK(ring.times.step == doctest::Approx(seconds));
  CHECK(ring.efficiency == doctest::Approx(0.011 / seconds));
  CHECK(ring.examples_per_second == doctest::Approx(8 * 32 / seconds));
  CHECK((*points)[3].efficiency > ring.efficiency);  // hierarchical crosses the network with less
  const std::string svg = scaling_svg(*points, "a <test>");
  CHECK(svg.find("a &lt;test&gt;") != std::string::npos);
  CHECK(svg.find("hierarchical: efficiency") != std::string::npos);
}

}  // namespace
}  // namespace mirra::simulate
