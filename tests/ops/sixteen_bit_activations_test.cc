// The 16-bit activations pass on a small pooled CNN: its rewrite pinned as golden text, which values
// turn bf16 (and which stay f32 because something else reads them or they are fetched), and training
// with it against training without.
#include <map>

#include "graph/print.h"
#include "graph/verify.h"
#include "tests/golden_file.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

// Two conv layers (2 and 8 input channels), each with ReLU and 2x2 max pooling, and a dense head, SGD,
// fused and rewritten for bf16; the 16-bit activations pass runs for `fetched` plus the loss and the
// update when asked.
struct PooledNet {
  graph::Graph graph;
  graph::NodeId train = graph::kInvalidNode;
  graph::ValueRef loss, conv1_pooled;
  int narrowed = 0;
};

PooledNet pooled_net(bool activations_16_bit, std::vector<graph::NodeId> fetched = {}) {
  PooledNet net;
  graph::Builder b(net.graph, ops::registry(), 4);
  graph::ValueRef x = ops::placeholder(b, "images", DType::f32, {-1, 8, 8, 2});
  for (const auto& [name, in, out] : {std::tuple{"conv1", 2, 8}, std::tuple{"conv2", 8, 8}}) {
    auto scope = b.scope(name);
    auto filter = ops::variable(b, "filter", {3, 3, in, out}, ops::Initializer::glorot_uniform());
    auto bias = ops::variable(b, "b", {out}, ops::Initializer::constant(0.05));
    x = ops::max_pool(b, ops::relu(b, ops::bias_add(b, ops::conv2d(b, x, filter), bias)), {});
    if (net.conv1_pooled.node == graph::kInvalidNode) net.conv1_pooled = x;
  }
  auto w = ops::variable(b, "dense/w", {2 * 2 * 8, 3}, ops::Initializer::glorot_uniform());
  auto objective = ops::classifier_objective(b, ops::matmul(b, ops::reshape(b, x, {-1, 2 * 2 * 8}), w));
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::sgd(0.2));
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  net.train = train->train;
  net.loss = objective.loss;
  ops::fuse_for_training(net.graph);
  ops::apply_mixed_precision(net.graph, ops::registry(), ops::MixedPrecision::bf16);
  if (activations_16_bit) {
    fetched.insert(fetched.end(), {net.train, net.loss.node});
    net.narrowed = ops::keep_activations_16_bit(net.graph, ops::registry(), fetched);
  }
  return net;
}

// The dtype of each node's output 0 that the nodes needed for the loss and the update read.
std::map<std::string, DType> live_types(const PooledNet& net) {
  std::map<std::string, DType> types;
  std::vector<graph::NodeId> stack = {net.train, net.loss.node};
  while (!stack.empty()) {
    const graph::Node& node = net.graph.node(stack.back());
    stack.pop_back();
    if (types.count(node.name) > 0) continue;
    types[node.name] = node.outputs.empty() ? DType::f32 : node.outputs[0].dtype;
    for (graph::ValueRef input : node.inputs) stack.push_back(input.node);
    for (graph::NodeId control : node.control_inputs) stack.push_back(control);
  }
  return types;
}

TEST_CASE("SixteenBitActivations.rewrite_matches_golden_text") {
  const PooledNet net = pooled_net(true);
  check_golden("tests/ops/golden/sixteen_bit_activations.txt", graph::to_text(net.graph));
}

TEST_CASE("SixteenBitActivations.pooled_values_and_their_gradients_turn_bf16") {
  const PooledNet net = pooled_net(true);
  // Both convolutions write bf16 for their pooling; the dense layer's input gradient writes bf16 for
  // conv2's pooling gradient, whose dx conv2's two gradients read. conv2's input gradient stays f32:
  // conv1's pooling gradient passes it to conv1's filter gradient, which is f32 (2 input channels).
  CHECK(net.narrowed == 3);
  const std::map<std::string, DType> types = live_types(net);
  const std::map<std::string, DType> want = {{"conv1/Relu/FusedConv2D", DType::bf16},
                                             {"conv1/MaxPool", DType::bf16},
                                             {"conv2/Relu/FusedConv2D", DType::bf16},
                                             {"conv2/MaxPool", DType::bf16},
                                             {"Reshape", DType::bf16},
                                             {"gradients/MatMul_grad/MatMul", DType::bf16},
                                             {"gradients/Reshape_grad/ReshapeLike", DType::bf16},
                                             {"gradients/conv2/Relu_grad/ReluGrad/MaxPoolGrad", DType::bf16},
                                             {"gradients/conv2/Conv2D_grad/Conv2DBackpropInput", DType::f32},
                                             {"gradients/conv1/Relu_grad/ReluGrad/MaxPoolGrad", DType::f32},
                                             {"MatMul", DType::f32},
                                             {"gradients/conv2/Conv2D_grad/Conv2DBackpropFilter", DType::f32}};
  for (const auto& entry : want) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE takes it in a lambda
    CAPTURE(name);
    REQUIRE(types.count(name) == 1);
    CHECK(types.at(name) == entry.second);
  }
  // The Casts of the values now bf16 are no longer read.
  for (const char* cast : {"conv1/MaxPool/to_bf16", "Reshape/to_bf16"}) {
    CAPTURE(cast);
    CHECK(types.count(cast) == 0);
  }
}

// Every node a step runs still passes its schema: a FusedConv2D now writing bf16 keeps its f32 bias,
// which its kernels add to the f32 sums before rounding.
TEST_CASE("SixteenBitActivations.rewrite_keeps_every_node_valid") {
  const PooledNet net = pooled_net(true);
  const std::vector<graph::NodeId> run = {net.train, net.loss.node};
  const graph::Status valid = graph::verify_types(net.graph, ops::registry(), run);
  CHECK_MESSAGE(valid.ok(), valid.to_string());
  const graph::Node& conv1 = net.graph.node(*net.graph.find("conv1/Relu/FusedConv2D"));
  CHECK(conv1.outputs[0].dtype == DType::bf16);
  CHECK(net.graph.type(conv1.inputs[2]).dtype == DType::f32);
}

TEST_CASE("SixteenBitActivations.a_fetched_value_stays_f32") {
  const PooledNet plain = pooled_net(false);
  const PooledNet net = pooled_net(true, {plain.conv1_pooled.node});
  CHECK(net.narrowed == 2);  // conv2's forward convolution and the dense layer's input gradient
  CHECK(net.graph.type(net.conv1_pooled).dtype == DType::f32);
  CHECK(live_types(net).at("conv1/Relu/FusedConv2D") == DType::f32);
}

TEST_CASE("SixteenBitActivations.trains_like_f32_activations") {
  runtime::Random rng(9);
  const Tensor images = random_tensor<float>(rng, {16, 8, 8, 2});
  std::vector<int64_t> label_values(16);
  for (int64_t i = 0; i < 16; ++i) label_values[static_cast<size_t>(i)] = i % 3;
  const Tensor labels = Tensor::from<int64_t>({16}, std::span<const int64_t>(label_values));
  std::map<bool, std::vector<double>> losses;
  for (bool activations_16_bit : {false, true}) {
    PooledNet net = pooled_net(activations_16_bit);
    runtime::Session session(net.graph, ops::kernels());
    for (int step = 0; step < 30; ++step) {
      auto out = session.run({{"images", images}, {"labels", labels}}, {net.loss}, {net.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      losses[activations_16_bit].push_back((*out)[0].to_vector<float>()[0]);
    }
  }
  const std::vector<double>& f32 = losses[false];
  const std::vector<double>& bf16 = losses[true];
  CHECK(f32.back() < 0.5 * f32.front());  // it learns
  CHECK(bf16.front() == doctest::Approx(f32.front()).epsilon(1e-2));
  for (size_t step = 0; step < f32.size(); ++step) CHECK(std::abs(bf16[step] - f32[step]) < 0.05 * f32.front());
}

TEST_CASE("SixteenBitActivations.run_for_bf16_on_cpus_that_multiply_it") {
  const std::vector<graph::DeviceId> cpus = {{graph::DeviceKind::cpu, 0}, {graph::DeviceKind::cpu, 1}};
  CHECK(ops::activations_stay_16_bit(ops::MixedPrecision::bf16, cpus) == ops::cpu_has_bf16_kernels());
  CHECK_FALSE(ops::activations_stay_16_bit(ops::MixedPrecision::fp16, cpus));
  CHECK_FALSE(ops::activations_stay_16_bit(ops::MixedPrecision::off, cpus));
  CHECK_FALSE(ops::activations_stay_16_bit(ops::MixedPrecision::bf16, {{graph::DeviceKind::gpu, 0}}));
  CHECK_FALSE(ops::activations_stay_16_bit(ops::MixedPrecision::bf16, {}));
  // The pass where it pays: all three products on such CPUs, none on a GPU.
  for (const bool on_gpu : {false, true}) {
    CAPTURE(on_gpu);
    PooledNet net = pooled_net(false);
    const std::vector<graph::DeviceId> devices = on_gpu ? std::vector<graph::DeviceId>{{graph::DeviceKind::gpu, 0}} : cpus;
    const int narrowed = ops::keep_activations_16_bit_where_it_pays(net.graph, ops::registry(), ops::MixedPrecision::bf16,
                                                                    devices, {net.train, net.loss.node});
    CHECK(narrowed == (!on_gpu && ops::cpu_has_bf16_kernels() ? 3 : 0));
    CHECK(net.graph.type(net.conv1_pooled).dtype == (narrowed > 0 ? DType::bf16 : DType::f32));
  }
}

}  // namespace
}  // namespace mirra::test
