// The graph layer: builder naming and scopes, build-time shape errors, the text and DOT forms,
// topological order, the nodes some roots need, structural and type verification, attributes, devices and seeds.
#include <doctest/doctest.h>

#include <algorithm>

#include "graph/dot.h"
#include "graph/print.h"
#include "graph/verify.h"
#include "ops/ops.h"

namespace mirra::graph {
namespace {

Graph small_mlp(uint64_t seed = 7) {
  Graph g;
  Builder b(g, ops::registry(), seed);
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 4});
  ValueRef h;
  {
    auto scope = b.scope("fc1");
    auto w = ops::variable(b, "w", {4, 3}, ops::Initializer::glorot_uniform());
    auto bias = ops::variable(b, "b", {3});
    h = ops::relu(b, ops::bias_add(b, ops::matmul(b, x, w), bias));
  }
  {
    auto scope = b.scope("fc2");
    auto w = ops::variable(b, "w", {3, 2}, ops::Initializer::he_normal());
    h = ops::softmax(b, ops::matmul(b, h, w));
  }
  MIRRA_CHECK(b.status().ok(), b.status().to_string());
  return g;
}

TEST_CASE("Graph.text_form.is_stable_and_readable") {
  const std::string golden =
      "x = Placeholder() {dtype=f32, shape=[?,4]} : f32[?,4]\n"
      "fc1/w = Variable() {dtype=f32, init_value=0, initializer=\"glorot_uniform\", seed=3595544800446187243, shape=[4,3], trainable=true} : f32[4,3]\n"
      "fc1/b = Variable() {dtype=f32, init_value=0, initializer=\"zeros\", seed=154844686297477902, shape=[3], trainable=true} : f32[3]\n"
      "fc1/MatMul = MatMul(x, fc1/w) {f32_output=false, transpose_a=false, transpose_b=false} : f32[?,3]\n"
      "fc1/BiasAdd = BiasAdd(fc1/MatMul, fc1/b) {data_format=\"NHWC\"} : f32[?,3]\n"
      "fc1/Relu = Relu(fc1/BiasAdd) : f32[?,3]\n"
      "fc2/w = Variable() {dtype=f32, init_value=0, initializer=\"he_normal\", seed=8308050873407804673, shape=[3,2], trainable=true} : f32[3,2]\n"
      "fc2/MatMul = MatMul(fc1/Relu, fc2/w) {f32_output=false, transpose_a=false, transpose_b=false} : f32[?,2]\n"
      "fc2/Softmax = Softmax(fc2/MatMul) : f32[?,2]\n";
  CHECK(to_text(small_mlp()) == golden);
  CHECK(to_text(small_mlp()) == to_text(small_mlp()));
  CHECK(to_text(small_mlp(8)) != to_text(small_mlp(7)));  // seeds follow the builder's seed
}

TEST_CASE("Graph.dot_form.has_nodes_and_typed_edges") {
  const std::string dot = to_dot(small_mlp());
  CHECK(dot.starts_with("digraph mirra {"));
  CHECK(dot.find("n3 [label=\"MatMul\", fillcolor=") != std::string::npos);  // fc1/MatMul in its scope's cluster
  CHECK(dot.find("label=\"fc1\"; style=\"rounded,dashed\"") != std::string::npos);
  CHECK(dot.find("n0 -> n3 [label=\"f32[?,4]\"];") != std::string::npos);
}

TEST_CASE("Graph.dot_form.collapses_scopes_below_a_depth") {
  const Graph g = small_mlp();
  const std::string dot = to_dot(g, {.collapse_below = 1});
  // fc1's and fc2's nodes are one box each, the placeholder stays itself, and one edge joins the boxes.
  CHECK(dot.find("fc1\\n" + std::to_string(std::count_if(g.nodes().begin(), g.nodes().end(), [](const Node& n) {
                   return n.name.starts_with("fc1/");
                 })) + " nodes") != std::string::npos);
  CHECK(dot.find("shape=box3d") != std::string::npos);
  const auto edges = [](const std::string& text) { return std::count(text.begin(), text.end(), '>'); };
  CHECK(edges(dot) < edges(to_dot(g)));
  CHECK(to_dot(g, {.collapse_below = 1}) == dot);  // stable
}

TEST_CASE("Builder.names.are_scoped_and_unique") {
  Graph g;
  Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {2});
  {
    auto outer = b.scope("block");
    auto inner = b.scope("fc1");
    (void)ops::relu(b, x);
    (void)ops::relu(b, x);
  }
  (void)ops::relu(b, x);
  CHECK(g.node(1).name == "block/fc1/Relu");
  CHECK(g.node(2).name == "block/fc1/Relu_1");
  CHECK(g.node(3).name == "Relu");
}

TEST_CASE("Builder.errors.name_the_node_and_input_types_and_the_first_error_wins") {
  Graph g;
  Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 784});
  auto w = ops::variable(b, "w", {100, 10});
  ValueRef bad;
  {
    auto scope = b.scope("fc1");
    bad = ops::matmul(b, x, w);
  }
  CHECK_FALSE(bad.valid());
  (void)ops::relu(b, bad);  // propagates without replacing the first error
  CHECK(b.status().message() == "node 'fc1/MatMul' (MatMul): inner dimensions differ; inputs (f32[?,784], f32[100,10])");

  Graph g2;
  Builder b2(g2, ops::registry());
  auto ints = ops::placeholder(b2, "i", DType::i32, {3});
  (void)ops::exp(b2, ints);
  CHECK(b2.status().message() == "node 'Exp' (Exp): input 0 must have dtype in {f32, f64}; inputs (i32[3])");

  Graph g3;
  Builder b3(g3, ops::registry());
  (void)b3.add({.op = "NoSuchOp"});
  CHECK(b3.status().message() == "node 'NoSuchOp': unknown op 'NoSuchOp'");
  auto y = ops::placeholder(b3, "y", DType::f32, {2});
  (void)b3.add({.op = "Relu", .inputs = {y}, .attrs = {{"alpha", 0.1}}});
  CHECK(b3.status().message() == "node 'NoSuchOp': unknown op 'NoSuchOp'");

  Graph g4;
  Builder b4(g4, ops::registry());
  auto z = ops::placeholder(b4, "z", DType::f32, {2});
  (void)b4.add({.op = "Relu", .inputs = {z}, .attrs = {{"alpha", 0.1}}});
  CHECK(b4.status().message() == "node 'Relu' (Relu): unknown attribute 'alpha'");
  Graph g5;
  Builder b5(g5, ops::registry());
  auto v = ops::placeholder(b5, "v", DType::f32, {2, 2});
  (void)b5.add({.op = "Transpose", .inputs = {v}, .attrs = {{"perm", std::string("0,1")}}});
  CHECK(b5.status().message() == "node 'Transpose' (Transpose): attribute 'perm' must be list(int), got string");
}

TEST_CASE("Graph.topological_order.respects_data_and_control_edges") {
  Graph g;
  Builder b(g, ops::registry());
  auto a = ops::placeholder(b, "a", DType::f32, {1});
  auto later = ops::relu(b, a);    // node 1
  auto earlier = ops::neg(b, a);   // node 2
  g.add_control_edge(earlier.node, later.node);
  auto order = g.topological_order();
  REQUIRE(order.ok());
  CHECK(*order == std::vector<NodeId>{0, 2, 1});
  g.add_control_edge(later.node, earlier.node);
  auto cyclic = g.topological_order();
  REQUIRE_FALSE(cyclic.ok());
  CHECK(cyclic.status().message().find("cycle") != std::string::npos);
  CHECK_FALSE(verify_structure(g).ok());
}

TEST_CASE("Graph.verify_structure.finds_broken_graphs") {
  Graph good = small_mlp();
  CHECK(verify_structure(good).ok());

  Graph missing = small_mlp();
  missing.mutable_node(3).inputs[0] = {999, 0};
  CHECK(verify_structure(missing).message() == "node 3 'fc1/MatMul' input 0: refers to missing node 999");

  Graph self = small_mlp();
  self.mutable_node(5).inputs[0] = {5, 0};
  CHECK(verify_structure(self).message() == "node 5 'fc1/Relu' input 0: a node cannot be its own input");

  Graph bad_output = small_mlp();
  bad_output.mutable_node(5).inputs[0] = {4, 3};
  CHECK(verify_structure(bad_output).message() == "node 5 'fc1/Relu' input 0: node 'fc1/BiasAdd' has no output 3");

  Graph renamed = small_mlp();
  renamed.mutable_node(5).name = "x";
  CHECK(verify_structure(renamed).message() == "node 5 'x': name is used by another node");
}

TEST_CASE("Graph.needed_for.follows_data_and_control_inputs") {
  Graph g = small_mlp();
  const NodeId matmul = *g.find("fc1/MatMul");
  const auto needed_names = [&] {
    const std::vector<bool> needed = g.needed_for(std::vector<NodeId>{matmul});
    std::vector<std::string> names;
    for (const Node& node : g.nodes()) {
      if (needed[node.id]) names.push_back(node.name);
    }
    return names;
  };
  CHECK(needed_names() == std::vector<std::string>{"x", "fc1/w", "fc1/MatMul"});
  g.add_control_edge(*g.find("fc2/w"), matmul);  // fc1/MatMul now runs after fc2/w
  CHECK(needed_names() == std::vector<std::string>{"x", "fc1/w", "fc1/MatMul", "fc2/w"});
}

TEST_CASE("Graph.verify_types.finds_nodes_their_schemas_refuse") {
  CHECK(verify_types(small_mlp(), ops::registry()).ok());

  Graph retyped = small_mlp();  // a rewrite that changed what a node reads but not the node
  graph::Node& x = retyped.mutable_node(*retyped.find("x"));
  x.attrs.set("dtype", DType::bf16);
  x.outputs[0].dtype = DType::bf16;
  CHECK(verify_types(retyped, ops::registry()).message().find("node 'fc1/MatMul' (MatMul): operands must have the same dtype") == 0);

  Graph misdeclared = small_mlp();  // a rewrite that changed a node's attributes but not its output
  misdeclared.mutable_node(*misdeclared.find("fc1/MatMul")).attrs.set("transpose_b", true);
  CHECK(verify_types(misdeclared, ops::registry()).message().find("node 'fc1/MatMul' (MatMul)") == 0);

  Graph resized = small_mlp();
  resized.mutable_node(*resized.find("fc1/Relu")).outputs[0].shape = Shape{-1, 7};
  CHECK(verify_types(resized, ops::registry()).message() ==
        "node 'fc1/Relu' (Relu): output 0 is declared f32[?,7], but its inputs give f32[?,3]");

  // Only the nodes the given ones need count: a rewrite may leave nodes nothing runs.
  CHECK(verify_types(resized, ops::registry(), std::vector<NodeId>{*resized.find("fc1/MatMul")}).ok());
  CHECK_FALSE(verify_types(resized, ops::registry(), std::vector<NodeId>{*resized.find("fc2/Softmax")}).ok());

  Graph unknown = small_mlp();
  unknown.mutable_node(*unknown.find("fc1/Relu")).op = "Gelu7";
  CHECK(verify_types(unknown, ops::registry()).message() == "node 'fc1/Relu': op 'Gelu7' is not registered");
}

TEST_CASE("Graph.keep_only.removes_nodes_and_renumbers_every_reference") {
  Graph g;
  Builder b(g, ops::registry());
  const ValueRef x = ops::placeholder(b, "x", DType::f32, {2});
  const ValueRef dead = ops::exp(b, x);
  const ValueRef y = ops::relu(b, x);
  const ValueRef z = ops::neg(b, y);
  g.add_control_edge(y.node, z.node);
  REQUIRE(b.status().ok());
  const NodeId roots[] = {z.node};
  const std::vector<NodeId> moved = g.keep_only(g.needed_for(roots));
  CHECK(g.size() == 3);
  CHECK(remap(dead, moved).valid() == false);
  CHECK(remap(x.node, moved) == 0);
  const ValueRef z2 = remap(z, moved);
  CHECK(z2 == ValueRef{2, 0});
  CHECK(g.node(2).inputs == std::vector<ValueRef>{remap(y, moved)});
  CHECK(g.node(2).control_inputs == std::vector<NodeId>{remap(y.node, moved)});
  CHECK(g.find("Exp") == std::nullopt);
  CHECK(g.find("Neg") == std::optional<NodeId>{2});
  for (NodeId id = 0; id < g.size(); ++id) CHECK(g.node(id).id == id);
  CHECK(verify_structure(g).ok());
}

TEST_CASE("Graph.replace_all_uses.rewires_consumers") {
  Graph g = small_mlp();
  const NodeId relu = *g.find("fc1/Relu");
  const NodeId bias_add = *g.find("fc1/BiasAdd");
  g.replace_all_uses({relu, 0}, {bias_add, 0});
  CHECK(g.node(*g.find("fc2/MatMul")).inputs[0] == ValueRef{bias_add, 0});
}

TEST_CASE("DeviceId.parse_and_print") {
  CHECK(DeviceId::parse("cpu:3")->to_string() == "cpu:3");
  CHECK(DeviceId::parse("cpu")->ordinal == 0);
  CHECK(DeviceId::parse("cuda:1")->kind == DeviceKind::gpu);
  CHECK(DeviceId::parse("cuda:1")->to_string() == "gpu:1");
  CHECK(DeviceId::parse("tpu:0").status().message() == "device 'tpu:0': kind must be one of 'cpu', 'gpu' (also 'cuda'), 'cpu_async'");
  CHECK(DeviceId::parse("cpu_async:2")->to_string() == "cpu_async:2");
  CHECK_FALSE(DeviceId::parse("cpu:x").ok());
  CHECK_FALSE(DeviceId::parse("cpu:-1").ok());
  CHECK_FALSE(DeviceId::parse("cpu:").ok());
}

TEST_CASE("DeviceId.a_device_of_another_task_names_its_task") {
  const auto remote = DeviceId::parse("/task:1/gpu:0");
  REQUIRE(remote.ok());
  CHECK(remote->task == 1);
  CHECK(remote->kind == DeviceKind::gpu);
  CHECK(remote->to_string() == "/task:1/gpu:0");
  CHECK(*remote != DeviceId{DeviceKind::gpu, 0});
  CHECK(DeviceId::parse("/task:12/cpu")->to_string() == "/task:12/cpu:0");
  CHECK(local(*remote, 1) == DeviceId{DeviceKind::gpu, 0});
  CHECK(local(*remote, 0) == *remote);
  CHECK(DeviceId::parse("/task:x/cpu:0").status().message() ==
        "device '/task:x/cpu:0': a task is written /task:N/ with N in [0, 65535], then the device");
  CHECK_FALSE(DeviceId::parse("/task:1").ok());
  CHECK_FALSE(DeviceId::parse("/task:-1/cpu:0").ok());
  CHECK(DeviceId::parse("/task:1/tpu:0").status().message() ==
        "device '/task:1/tpu:0': kind must be one of 'cpu', 'gpu' (also 'cuda'), 'cpu_async'");
}

TEST_CASE("Attr.values_print_stably") {
  CHECK(attr_to_string(AttrValue{int64_t{3}}) == "3");
  CHECK(attr_to_string(AttrValue{0.1}) == "0.1");
  CHECK(attr_to_string(AttrValue{Shape{-1, 3}}) == "[?,3]");
  CHECK(attr_to_string(AttrValue{std::vector<std::string>{"a", "b"}}) == "[\"a\",\"b\"]");
  const std::vector<float> values(10, 1.0f);
  CHECK(attr_to_string(AttrValue{TensorValue::from<float>({10}, std::span<const float>(values))}) ==
        "<f32[10] 1 1 1 1 1 1 1 1 ...>");
}

TEST_CASE("Shape.num_elements_detects_overflow_and_unknowns") {
  CHECK(Shape{2, 3}.num_elements() == 6);
  CHECK_FALSE(Shape{-1, 3}.num_elements().has_value());
  CHECK_FALSE(Shape{int64_t{1} << 40, int64_t{1} << 40}.num_elements().has_value());
  CHECK(Shape{}.num_elements() == 1);
}

}  // namespace
}  // namespace mirra::graph
