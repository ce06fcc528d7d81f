// 16-bit products and the mixed-precision pass. The kernels on bf16 and f16 operands must equal the
// f32 kernels on the same values widened (exact) within f32 summation order, or within half an ulp
// of the 16-bit type when they round their result; the pass's rewrite of a small conv net is pinned
// as golden text, keeps every value's dtype, casts each value once, and trains like f32.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "graph/print.h"
#include "graph/verify.h"
#include "tests/golden_file.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

Tensor cast_to(const Tensor& t, DType dtype) {
  auto out = run_op("Cast", {t}, {{"dtype", dtype}});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return (*out)[0];
}

// Checks `op` on `operands` (f32 values already representable in `low`) given as `low`, with and
// without f32_output, against the f32 kernel on the same values; `extra` (FusedConv2D's bias) comes
// in the output's dtype. `backend_tolerance`: the backends' where their kernels round the f32 sums
// to `low` on the way (the GPU's convolutions: cuDNN writes 16-bit sums).
void check_sixteen_bit(const std::string& op, const std::vector<Tensor>& operands, const std::vector<Tensor>& extra,
                       AttrMap attrs, DType low, std::optional<double> backend_tolerance = std::nullopt) {
  std::vector<Tensor> wide = operands;
  wide.insert(wide.end(), extra.begin(), extra.end());
  auto want = run_op(op, wide, attrs);
  REQUIRE_MESSAGE(want.ok(), want.status().to_string());
  for (bool f32_output : {true, false}) {
    CAPTURE(f32_output);
    std::vector<Tensor> inputs;
    for (const Tensor& t : operands) inputs.push_back(cast_to(t, low));
    for (const Tensor& t : extra) inputs.push_back(f32_output ? t : cast_to(t, low));
    attrs.set("f32_output", f32_output);
    const Tensor expected = f32_output ? (*want)[0] : cast_to((*want)[0], low);
    // f32 sums in another order; a 16-bit result is the f32 one rounded, and sums in another order
    // may round to its neighbour: within one ulp (2^-7 for bf16, 2^-10 for f16, relative).
    const double tolerance = f32_output ? 1e-4 : low == DType::bf16 ? 8e-3 : 1e-3;
    check_op(op, inputs, attrs, {expected}, tolerance, backend_tolerance);
  }
}

// Random values in [-1, 1) rounded to `low`, as f32.
Tensor representable(runtime::Random& rng, const TensorShape& shape, DType low) {
  return cast_to(cast_to(random_tensor<float>(rng, shape), low), DType::f32);
}

TEST_CASE("Kernels.MatMul.sixteen_bit_operands_match_f32") {
  runtime::Random rng(61);
  for (DType low : {DType::bf16, DType::f16}) {
    // The last two are cut into chunks of rows (2 of 150) and of columns (134, 134, 132).
    for (const std::array<int64_t, 3>& size :
         {std::array<int64_t, 3>{5, 7, 3}, {64, 96, 48}, {1, 200, 1}, {300, 100, 150}, {130, 110, 400}}) {
      const int64_t m = size[0], k = size[1], n = size[2];  // not a structured binding: CAPTURE takes them
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          CAPTURE(graph::dtype_name(low)); CAPTURE(m); CAPTURE(k); CAPTURE(n); CAPTURE(ta); CAPTURE(tb);
          const Tensor a = representable(rng, ta ? TensorShape{k, m} : TensorShape{m, k}, low);
          const Tensor b = representable(rng, tb ? TensorShape{n, k} : TensorShape{k, n}, low);
          check_sixteen_bit("MatMul", {a, b}, {}, {{"transpose_a", ta}, {"transpose_b", tb}}, low);
        }
      }
    }
  }
}

TEST_CASE("Kernels.Conv2D_family.sixteen_bit_operands_match_f32") {
  runtime::Random rng(62);
  struct Case {
    const char* format;
    const char* padding;
    int64_t stride;
  };
  for (DType low : {DType::bf16, DType::f16}) {
    for (const Case& c : {Case{"NHWC", "SAME", 1}, Case{"NCHW", "SAME", 1}, Case{"NHWC", "VALID", 2}}) {
      CAPTURE(graph::dtype_name(low)); CAPTURE(c.format); CAPTURE(c.padding); CAPTURE(c.stride);
      const bool nchw = std::string_view(c.format) == "NCHW";
      const AttrMap attrs = {{"padding", std::string(c.padding)},
                             {"data_format", std::string(c.format)},
                             {"strides", std::vector<int64_t>{c.stride, c.stride}}};
      const Tensor input = representable(rng, nchw ? TensorShape{2, 16, 7, 6} : TensorShape{2, 7, 6, 16}, low);
      const Tensor filter = representable(rng, {3, 3, 16, 8}, low);
      auto forward = run_op("Conv2D", {input, filter}, attrs);
      REQUIRE(forward.ok());
      const Tensor dy = representable(rng, (*forward)[0].shape(), low);
      const Tensor bias = representable(rng, {8}, low);
      // The GPU rounds a convolution's sums to `low` (within one ulp, as a 16-bit result) even for an
      // f32_output, and before FusedConv2D's bias: then within half an ulp of the sums, whose 144
      // products of values in [-1, 1) stay below 32 (a standard deviation of 4).
      const double rounded = low == DType::bf16 ? 8e-3 : 1e-3;
      const double rounded_before_bias = low == DType::bf16 ? 0.0625 : 8e-3;
      check_sixteen_bit("Conv2D", {input, filter}, {}, attrs, low, rounded);
      AttrMap fused = attrs;
      fused.set("activation", std::string("relu"));
      check_sixteen_bit("FusedConv2D", {input, filter}, {bias}, fused, low, rounded_before_bias);
      // A 16-bit result with an f32 bias: the f32 kernel's result rounded once.
      auto with_f32_bias = run_op("FusedConv2D", {input, filter, bias}, fused);
      REQUIRE(with_f32_bias.ok());
      AttrMap narrow = fused;
      narrow.set("f32_output", false);
      check_op("FusedConv2D", {cast_to(input, low), cast_to(filter, low), bias}, narrow,
               {cast_to((*with_f32_bias)[0], low)}, low == DType::bf16 ? 8e-3 : 1e-3, rounded_before_bias);
      check_sixteen_bit("Conv2DBackpropInput", {input, filter, dy}, {}, attrs, low, rounded);
      check_sixteen_bit("Conv2DBackpropFilter", {input, filter, dy}, {}, attrs, low, rounded);
    }
  }
}

graph::Status add_status(const std::function<void(graph::Builder&)>& build) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  build(b);
  return b.status();
}

TEST_CASE("Ops.products.f32_output_and_operand_dtypes_are_checked") {
  const auto operands = [](graph::Builder& b, DType a, DType w) {
    return std::pair{ops::placeholder(b, "a", a, {2, 3}), ops::placeholder(b, "w", w, {3, 4})};
  };
  const graph::Status f32_operands = add_status([&](graph::Builder& b) {
    auto [a, w] = operands(b, DType::f32, DType::f32);
    b.add_value({.op = "MatMul", .inputs = {a, w}, .attrs = {{"f32_output", true}}});
  });
  CHECK(f32_operands.message().find("f32_output is for bf16 and f16 operands") != std::string::npos);
  const graph::Status mixed = add_status([&](graph::Builder& b) {
    auto [a, w] = operands(b, DType::bf16, DType::f32);
    ops::matmul(b, a, w);
  });
  CHECK(mixed.message().find("operands must have the same dtype") != std::string::npos);
  const graph::Status bias = add_status([&](graph::Builder& b) {
    auto x = ops::placeholder(b, "x", DType::bf16, {1, 4, 4, 2});
    auto f = ops::placeholder(b, "f", DType::bf16, {3, 3, 2, 4});
    auto bias = ops::placeholder(b, "b", DType::bf16, {4});
    b.add_value({.op = "FusedConv2D", .inputs = {x, f, bias}, .attrs = {{"f32_output", true}}});
  });
  CHECK(bias.message().find("bias must be f32 or have the output's dtype") != std::string::npos);
  // A 16-bit result may take an f32 bias (added to the f32 sums before they are rounded).
  const graph::Status f32_bias = add_status([&](graph::Builder& b) {
    auto x = ops::placeholder(b, "x", DType::bf16, {1, 4, 4, 2});
    auto f = ops::placeholder(b, "f", DType::bf16, {3, 3, 2, 4});
    auto bias = ops::placeholder(b, "b", DType::f32, {4});
    b.add_value({.op = "FusedConv2D", .inputs = {x, f, bias}});
  });
  CHECK_MESSAGE(f32_bias.ok(), f32_bias.to_string());
  const graph::Status gradient = add_status([&](graph::Builder& b) {
    auto a = ops::cast(b, ops::placeholder(b, "a", DType::f32, {2, 3}), DType::bf16);
    auto w = ops::cast(b, ops::variable(b, "w", {3, 4}), DType::bf16);
    auto y = b.add_value({.op = "MatMul", .inputs = {a, w}, .attrs = {{"f32_output", true}}});
    (void)ops::minimize(b, ops::reduce_mean(b, y), ops::Optimizer::sgd(0.1));
  });
  CHECK(gradient.message().find("rewrites the graph after differentiation") != std::string::npos);
}

// Two conv layers (2 and 8 input channels) and a dense head, SGD, fused; `mode` applied after.
struct SmallNet {
  graph::Graph graph;
  graph::NodeId train = graph::kInvalidNode;
  graph::ValueRef loss;
  int rewritten = 0;
};

SmallNet small_net(ops::MixedPrecision mode, const std::vector<graph::DeviceId>& devices = {}) {
  SmallNet net;
  graph::Builder b(net.graph, ops::registry(), 3);
  auto images = ops::placeholder(b, "images", DType::f32, {-1, 4, 4, 2});
  graph::ValueRef x = images;
  for (const auto& [name, in, out] : {std::tuple{"conv1", 2, 8}, std::tuple{"conv2", 8, 4}}) {
    auto scope = b.scope(name);
    auto filter = ops::variable(b, "filter", {3, 3, in, out}, ops::Initializer::glorot_uniform());
    auto bias = ops::variable(b, "b", {out}, ops::Initializer::constant(0.05));
    x = ops::relu(b, ops::bias_add(b, ops::conv2d(b, x, filter), bias));
  }
  auto w = ops::variable(b, "dense/w", {4 * 4 * 4, 3}, ops::Initializer::glorot_uniform());
  auto objective = ops::classifier_objective(b, ops::matmul(b, ops::reshape(b, x, {-1, 4 * 4 * 4}), w));
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::sgd(0.2));
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  net.train = train->train;
  net.loss = objective.loss;
  ops::fuse_conv_bias_relu(net.graph);
  net.rewritten = ops::apply_mixed_precision(net.graph, ops::registry(), mode, devices);
  return net;
}

TEST_CASE("MixedPrecision.rewrite_matches_golden_text") {
  const SmallNet net = small_net(ops::MixedPrecision::bf16);
  check_golden("tests/ops/golden/mixed_precision_bf16.txt", graph::to_text(net.graph));
}

TEST_CASE("MixedPrecision.casts_each_operand_once_and_keeps_f32_elsewhere") {
  for (ops::MixedPrecision mode : {ops::MixedPrecision::bf16, ops::MixedPrecision::fp16}) {
    const DType low = mode == ops::MixedPrecision::bf16 ? DType::bf16 : DType::f16;
    CAPTURE(graph::dtype_name(low));
    const SmallNet plain = small_net(ops::MixedPrecision::off);
    const SmallNet net = small_net(mode);
    CHECK(plain.rewritten == 0);
    const graph::Status valid = graph::verify_types(net.graph, ops::registry());
    CHECK_MESSAGE(valid.ok(), valid.to_string());
    std::map<std::string, DType> plain_types;
    for (const graph::Node& node : plain.graph.nodes()) plain_types[node.name] = node.outputs.empty() ? DType::f32 : node.outputs[0].dtype;
    std::set<graph::ValueRef> cast_sources;
    int products = 0;
    for (const graph::Node& node : net.graph.nodes()) {
      CAPTURE(node.name);
      if (auto it = plain_types.find(node.name); it != plain_types.end()) {
        // Every value the f32 graph had keeps its dtype: variables, slots and updates stay f32.
        if (!node.outputs.empty()) CHECK(node.outputs[0].dtype == it->second);
        continue;
      }
      REQUIRE(node.op == "Cast");  // all the pass adds
      CHECK(node.outputs[0].dtype == low);
      CHECK(cast_sources.insert(node.inputs[0]).second);  // one Cast per value
    }
    for (const graph::Node& node : net.graph.nodes()) {
      const bool product = node.op == "MatMul" || node.op.starts_with("Conv2D") || node.op == "FusedConv2D";
      if (!product) continue;
      CAPTURE(node.name);
      const bool wide_filter_gradient = node.op == "Conv2DBackpropFilter" && net.graph.type(node.inputs[1]).shape.dim(2) < 8;
      CHECK(net.graph.type(node.inputs[0]).dtype == (wide_filter_gradient ? DType::f32 : low));
      CHECK(*node.attrs.get<bool>("f32_output") == !wide_filter_gradient);
      products += wide_filter_gradient ? 0 : 1;
    }
    // Forward: 2 convolutions (and the 2 they were fused from), 1 product; backward: 1 filter gradient
    // in 16 bits (conv2's; conv1's has 2 input channels), 1 input gradient, 2 products.
    CHECK(net.rewritten == products);
    CHECK(net.rewritten == 9);
  }
}

// For GPUs, every convolution whose channel counts are not multiples of 8 stays f32 (cuDNN's 16-bit
// paths are the tensor cores'): conv1 (2 -> 8) and conv2 (8 -> 4), forward and backward; the
// products stay 16-bit.
TEST_CASE("MixedPrecision.on_gpus_keeps_convolutions_the_tensor_cores_do_not_take_in_f32") {
  const SmallNet net = small_net(ops::MixedPrecision::bf16, {graph::DeviceId{graph::DeviceKind::gpu, 0}});
  int convolutions = 0, products = 0;
  for (const graph::Node& node : net.graph.nodes()) {
    CAPTURE(node.name);
    if (node.op == "MatMul") {
      CHECK(net.graph.type(node.inputs[0]).dtype == DType::bf16);
      ++products;
    } else if (node.op.starts_with("Conv2D") || node.op == "FusedConv2D") {
      CHECK(net.graph.type(node.inputs[0]).dtype == DType::f32);
      CHECK(*node.attrs.get<bool>("f32_output") == false);
      ++convolutions;
    }
  }
  // 2 forward (and the 2 they were fused from), 2 filter gradients, conv2's input gradient.
  CHECK(convolutions == 7);
  CHECK(products == 3);
  CHECK(net.rewritten == products);
  // Where no GPU trains it, the CPU's rule alone: only conv1's filter gradient stays f32.
  CHECK(small_net(ops::MixedPrecision::bf16, {graph::DeviceId{graph::DeviceKind::cpu_async, 0}}).rewritten == 9);
}

TEST_CASE("MixedPrecision.bf16_trains_like_f32") {
  runtime::Random rng(8);
  const Tensor images = random_tensor<float>(rng, {16, 4, 4, 2});
  std::vector<int64_t> label_values(16);
  for (int64_t i = 0; i < 16; ++i) label_values[static_cast<size_t>(i)] = i % 3;
  const Tensor labels = Tensor::from<int64_t>({16}, std::span<const int64_t>(label_values));
  std::map<ops::MixedPrecision, std::vector<double>> losses;
  for (ops::MixedPrecision mode : {ops::MixedPrecision::off, ops::MixedPrecision::bf16, ops::MixedPrecision::fp16}) {
    SmallNet net = small_net(mode);
    runtime::Session session(net.graph, ops::kernels());
    for (int step = 0; step < 30; ++step) {
      auto out = session.run({{"images", images}, {"labels", labels}}, {net.loss}, {net.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      losses[mode].push_back((*out)[0].to_vector<float>()[0]);
    }
  }
  const std::vector<double>& f32 = losses[ops::MixedPrecision::off];
  CHECK(f32.back() < 0.5 * f32.front());  // it learns
  for (ops::MixedPrecision mode : {ops::MixedPrecision::bf16, ops::MixedPrecision::fp16}) {
    CAPTURE(ops::mixed_precision_name(mode));
    const std::vector<double>& low = losses[mode];
    CHECK(low.front() == doctest::Approx(f32.front()).epsilon(1e-2));
    for (size_t step = 0; step < f32.size(); ++step) CHECK(std::abs(low[step] - f32[step]) < 0.05 * f32.front());
  }
}

TEST_CASE("MixedPrecision.names") {
  for (ops::MixedPrecision mode : {ops::MixedPrecision::off, ops::MixedPrecision::bf16, ops::MixedPrecision::fp16}) {
    auto parsed = ops::parse_mixed_precision(ops::mixed_precision_name(mode));
    REQUIRE(parsed.ok());
    CHECK(*parsed == mode);
  }
  auto bad = ops::parse_mixed_precision("fp8");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "mixed precision 'fp8' is not known (off, bf16, fp16)");
}

}  // namespace
}  // namespace mirra::test
