// Every op's gradient rule against central differences computed in float64: for random inputs and a
// random weighting R of each output, d(sum(R * op(inputs)))/d(input) from gradients() must match
// (L(x + h) - L(x - h)) / 2h element by element. Pooling has no f64 kernels (oneDNN's and mirra's
// pooling take f32 and bf16); it is checked in f32 with a larger step and tolerance. The table must
// cover every op with a gradient rule (op_coverage_main.cc checks).
#include <cmath>

#include "graph/gradients.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {

std::set<std::string>& gradient_checked_ops() {
  static std::set<std::string> ops;
  return ops;
}

namespace {

using List = std::vector<int64_t>;

struct GradientCase {
  std::string op;
  std::vector<Tensor> inputs;
  graph::AttrMap attrs = {};
  std::vector<size_t> wrt = {0};       // inputs to differentiate
  std::vector<size_t> outputs = {};    // outputs in the loss (default: all)
  double step = 1e-6;
  double tolerance = 1e-6;
};

void check_gradient(const GradientCase& c) {
  CAPTURE(c.op);
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 5);
  runtime::Random rng(99);
  std::vector<graph::ValueRef> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(ops::placeholder(b, "in" + std::to_string(i), c.inputs[i].dtype(), graph::Shape(c.inputs[i].shape().to_vector())));
  }
  const graph::NodeId id = b.add({.op = c.op, .inputs = inputs, .attrs = c.attrs});
  REQUIRE_MESSAGE(b.status().ok(), b.status().to_string());
  std::vector<size_t> used = c.outputs;
  if (used.empty()) for (size_t k = 0; k < g.node(id).outputs.size(); ++k) used.push_back(k);
  graph::ValueRef loss;
  for (size_t k : used) {
    const graph::TensorType type = g.node(id).outputs[k];
    std::vector<double> weights(static_cast<size_t>(*type.shape.num_elements()));
    for (double& w : weights) w = rng.uniform() * 2 - 1;
    const graph::ValueRef r = type.dtype == DType::f32
        ? ops::constant<float>(b, type.shape, std::span<const float>(std::vector<float>(weights.begin(), weights.end())))
        : ops::constant<double>(b, type.shape, std::span<const double>(weights));
    const graph::ValueRef term = ops::reduce_sum(b, ops::mul(b, graph::ValueRef{id, static_cast<uint16_t>(k)}, r));
    loss = loss.valid() ? ops::add(b, loss, term) : term;
  }
  std::vector<graph::ValueRef> xs;
  for (size_t i : c.wrt) xs.push_back(inputs[i]);
  auto grads = graph::gradients(b, loss, xs);
  REQUIRE_MESSAGE(grads.ok(), grads.status().to_string());
  runtime::Session session(g, ops::kernels());
  auto feeds_with = [&](const std::vector<Tensor>& values) {
    runtime::Feeds feeds;
    for (size_t i = 0; i < values.size(); ++i) feeds["in" + std::to_string(i)] = values[i];
    return feeds;
  };
  auto analytic = session.run(feeds_with(c.inputs), std::span<const graph::ValueRef>(*grads));
  REQUIRE_MESSAGE(analytic.ok(), analytic.status().to_string());
  // The same gradient on every backend under test, against the CPU kernels'.
  for (graph::DeviceKind kind : backends_under_test()) {
    if (!has_kernel(kind, c.op)) continue;
    runtime::Session on_device(g, ops::kernels(), backend_session_options(kind));
    auto got = on_device.run(feeds_with(c.inputs), std::span<const graph::ValueRef>(*grads));
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    check_conformance(kind, c.op + " gradient", *got, *analytic, c.tolerance);
  }
  for (size_t w = 0; w < c.wrt.size(); ++w) {
    const size_t which = c.wrt[w];
    const Tensor& base = c.inputs[which];
    REQUIRE((*analytic)[w].type_string() == base.type_string());
    for (int64_t j = 0; j < base.num_elements(); ++j) {
      double losses[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<Tensor> moved = c.inputs;
        moved[which] = make_tensor(base.dtype(), base.shape(), [&](int64_t i) {
          return element(base, i) + (i == j ? (side == 0 ? c.step : -c.step) : 0.0);
        });
        auto out = session.run(feeds_with(moved), {loss});
        REQUIRE(out.ok());
        losses[side] = element((*out)[0], 0);
      }
      const double numeric = (losses[0] - losses[1]) / (2 * c.step);
      const double got = element((*analytic)[w], j);
      if (std::abs(got - numeric) > c.tolerance * std::max(1.0, std::abs(numeric))) {
        FAIL("input " << which << " element " << j << ": gradient " << got << ", central difference " << numeric);
      }
    }
  }
  gradient_checked_ops().insert(c.op);
}

Tensor rand64(runtime::Random& rng, const TensorShape& shape, double low = -1, double high = 1) {
  return random_tensor<double>(rng, shape, low, high);
}

// Distinct values at least 0.05 apart, in random order: a max never ties, nor flips within one step.
Tensor spaced32(runtime::Random& rng, const TensorShape& shape) {
  std::vector<double> values(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.05 * static_cast<double>(i);
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
  return make_tensor(DType::f32, shape, [&](int64_t i) { return values[static_cast<size_t>(i)]; });
}

TEST_CASE("Gradients.every_differentiable_op.matches_central_differences") {
  runtime::Random rng(7);
  std::vector<GradientCase> cases;
  for (const char* op : {"Neg", "Exp", "Square", "Relu", "Sigmoid", "Tanh", "Erf", "Softplus"}) cases.push_back({op, {rand64(rng, {3, 4})}});
  for (bool approximate : {false, true}) cases.push_back({"Gelu", {rand64(rng, {3, 4}, -3, 3)}, {{"approximate", approximate}}});
  // Abs and Sign away from their kink at 0.
  for (const char* op : {"Abs", "Sign"}) {
    cases.push_back({op, {rand64(rng, {3, 4}, 0.1, 2)}});
    cases.push_back({op, {rand64(rng, {3, 4}, -2, -0.1)}});
  }
  for (const char* op : {"Log", "Sqrt", "Rsqrt"}) cases.push_back({op, {rand64(rng, {3, 4}, 0.5, 2)}});
  for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum"}) {
    cases.push_back({op, {rand64(rng, {3, 4}), rand64(rng, {3, 4})}, {}, {0, 1}});
    cases.push_back({op, {rand64(rng, {3, 4}), rand64(rng, {4})}, {}, {0, 1}});
    cases.push_back({op, {rand64(rng, {2, 1, 3}), rand64(rng, {4, 1})}, {}, {0, 1}});
  }
  // LeakyRelu away from its kink at 0, at TensorFlow's default slope and another.
  for (double alpha : {0.2, 0.05}) cases.push_back({"LeakyRelu", {rand64(rng, {3, 4}, 0.05, 1)}, {{"alpha", alpha}}});
  for (double alpha : {0.2, 0.05}) cases.push_back({"LeakyRelu", {rand64(rng, {3, 4}, -1, -0.05)}, {{"alpha", alpha}}});
  // Pow: positive bases (both gradients), broadcast; a negative base gets no gradient for its exponent.
  cases.push_back({"Pow", {rand64(rng, {3, 4}, 0.5, 2), rand64(rng, {3, 4}, -2, 2)}, {}, {0, 1}});
  cases.push_back({"Pow", {rand64(rng, {2, 3}, 0.5, 2), rand64(rng, {3}, -2, 2)}, {}, {0, 1}});
  cases.push_back({"Pow", {rand64(rng, {4}, -2, -0.5), Tensor::from<double>({4}, {2, 3, -1, 0})}, {}, {0}});
  // SelectV2: the gradient split between its values by the condition, each summed to its shape.
  cases.push_back({"SelectV2", {Tensor::from<bool>({2, 3}, {true, false, true, false, false, true}), rand64(rng, {2, 3}), rand64(rng, {2, 3})},
                   {}, {1, 2}});
  cases.push_back({"SelectV2", {Tensor::from<bool>({3}, {true, false, true}), rand64(rng, {2, 1}), rand64(rng, {})}, {}, {1, 2}});
  cases.push_back({"Tile", {rand64(rng, {2, 3})}, {{"multiples", List{2, 3}}}});
  cases.push_back({"Tile", {rand64(rng, {2, 1, 3})}, {{"multiples", List{1, 4, 2}}}});
  cases.push_back({"ExpandDims", {rand64(rng, {2, 3})}, {{"axis", int64_t{-1}}}});
  cases.push_back({"Squeeze", {rand64(rng, {2, 1, 3})}, {{"axis", List{1}}}});
  cases.push_back({"CheckNumerics", {rand64(rng, {3, 4})}, {{"message", std::string("x")}}});
  cases.push_back({"Div", {rand64(rng, {3, 4}), rand64(rng, {4}, 0.5, 2)}, {}, {0, 1}});
  cases.push_back({"Div", {rand64(rng, {1}), rand64(rng, {2, 3}, 0.5, 2)}, {}, {0, 1}});
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back({"MatMul", {rand64(rng, ta ? TensorShape{4, 3} : TensorShape{3, 4}), rand64(rng, tb ? TensorShape{2, 4} : TensorShape{4, 2})},
                       {{"transpose_a", ta}, {"transpose_b", tb}}, {0, 1}});
    }
  }
  cases.push_back({"BiasAdd", {rand64(rng, {3, 4}), rand64(rng, {4})}, {}, {0, 1}});
  // Batched products: adjoints and broadcast batch dims (the gradient summed over them).
  for (bool ax : {false, true}) {
    for (bool ay : {false, true}) {
      cases.push_back({"BatchMatMulV2", {rand64(rng, ax ? TensorShape{2, 4, 3} : TensorShape{2, 3, 4}), rand64(rng, ay ? TensorShape{2, 2, 4} : TensorShape{2, 4, 2})},
                       {{"adj_x", ax}, {"adj_y", ay}}, {0, 1}});
    }
  }
  cases.push_back({"BatchMatMulV2", {rand64(rng, {2, 1, 3, 2}), rand64(rng, {3, 2, 2})}, {}, {0, 1}});
  cases.push_back({"BatchMatMulV2", {rand64(rng, {3, 2}), rand64(rng, {2, 2, 3})}, {}, {0, 1}});
  // Gathers with repeated indices (their rows' gradients add up), along the first and a middle axis.
  cases.push_back({"GatherV2", {rand64(rng, {5, 3}), Tensor::from<int64_t>({2, 3}, {4, 0, 4, 1, 4, 0})}, {}, {0}});
  cases.push_back({"GatherV2", {rand64(rng, {2, 4, 3}), Tensor::from<int32_t>({3}, {3, 3, 1})}, {{"axis", int64_t{1}}}, {0}});
  // Attention: causal, masked, a given scale; lengths that differ.
  cases.push_back({"ScaledDotProductAttention", {rand64(rng, {1, 2, 3, 2}), rand64(rng, {1, 2, 3, 2}), rand64(rng, {1, 2, 3, 2})},
                   {{"causal", true}}, {0, 1, 2}, {0}});
  cases.push_back({"ScaledDotProductAttention",
                   {rand64(rng, {2, 1, 3, 2}), rand64(rng, {2, 1, 4, 2}), rand64(rng, {2, 1, 4, 3}), rand64(rng, {3, 4}, -1, 0)},
                   {{"scale", 0.8}}, {0, 1, 2}, {0}});
  cases.push_back({"Dropout", {rand64(rng, {4, 3}), Tensor::from<int64_t>({2}, {5, 9})}, {{"rate", 0.4}, {"seed", int64_t{3}}}, {0}, {0}});
  cases.push_back({"UnsortedSegmentSum", {rand64(rng, {5, 2}), Tensor::from<int64_t>({5}, {2, -1, 0, 2, 3})},
                   {{"num_segments", int64_t{4}}}, {0}});
  for (const TensorShape& shape : {TensorShape{3, 5}, TensorShape{2, 2, 4}}) {
    cases.push_back({"LayerNorm", {rand64(rng, shape, -2, 2), rand64(rng, {shape.dim(shape.rank() - 1)}, 0.5, 1.5),
                                   rand64(rng, {shape.dim(shape.rank() - 1)})},
                     {{"epsilon", 1e-3}}, {0, 1, 2}, {0}});
  }
  cases.push_back({"BiasAdd", {rand64(rng, {2, 3, 2, 2}), rand64(rng, {3})}, {{"data_format", std::string("NCHW")}}, {0, 1}});
  // Batch normalisation: y's gradient to x, scale and offset (TensorFlow's rule differentiates only y).
  for (const char* format : {"NHWC", "NCHW"}) {
    for (bool training : {true, false}) {
      const TensorShape x = std::string(format) == "NHWC" ? TensorShape{2, 3, 2, 3} : TensorShape{2, 3, 3, 2};
      cases.push_back({"FusedBatchNormV3",
                       {rand64(rng, x), rand64(rng, {3}, 0.5, 1.5), rand64(rng, {3}), rand64(rng, {3}), rand64(rng, {3}, 0.5, 2)},
                       {{"data_format", std::string(format)}, {"is_training", training}, {"epsilon", 1e-3}},
                       {0, 1, 2},
                       {0}});
    }
  }
  cases.push_back({"Softmax", {rand64(rng, {3, 5})}});
  cases.push_back({"LogSoftmax", {rand64(rng, {3, 5})}});
  cases.push_back({"SparseSoftmaxCrossEntropyWithLogits", {rand64(rng, {4, 5}), Tensor::from<int32_t>({4}, {0, 4, 2, 2})}, {}, {0}, {0}});
  cases.push_back({"Reshape", {rand64(rng, {2, 6})}, {{"shape", List{3, -1}}}});
  cases.push_back({"ReshapeLike", {rand64(rng, {2, 6}), rand64(rng, {4, 3})}});
  cases.push_back({"Transpose", {rand64(rng, {2, 3, 4})}, {{"perm", List{2, 0, 1}}}});
  cases.push_back({"Identity", {rand64(rng, {3})}});
  cases.push_back({"Cast", {rand64(rng, {3})}, {{"dtype", DType::f64}}});
  cases.push_back({"ZerosLike", {rand64(rng, {3})}});
  cases.push_back({"Concat", {rand64(rng, {2, 3}), rand64(rng, {2, 2})}, {{"axis", int64_t{1}}}, {0, 1}});
  cases.push_back({"Split", {rand64(rng, {4, 3})}, {{"axis", int64_t{0}}, {"num_split", int64_t{2}}}});
  cases.push_back({"Slice", {rand64(rng, {4, 5})}, {{"begin", List{1, 2}}, {"size", List{2, -1}}}});
  cases.push_back({"Pad", {rand64(rng, {2, 3})}, {{"paddings", List{1, 0, 2, 1}}}});
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
    cases.push_back({op, {rand64(rng, {3, 4})}, {{"axes", List{1}}}});
    cases.push_back({op, {rand64(rng, {2, 3, 4})}, {{"axes", List{0, 2}}, {"keep_dims", true}}});
    cases.push_back({op, {rand64(rng, {3, 4})}});
  }
  for (bool nchw : {false, true}) {
    const std::string format = nchw ? "NCHW" : "NHWC";
    cases.push_back({"Conv2D", {rand64(rng, nchw ? TensorShape{2, 2, 5, 5} : TensorShape{2, 5, 5, 2}), rand64(rng, {3, 3, 2, 3})},
                     {{"data_format", format}}, {0, 1}});
    cases.push_back({"Conv2D", {rand64(rng, nchw ? TensorShape{1, 2, 7, 6} : TensorShape{1, 7, 6, 2}), rand64(rng, {3, 2, 2, 2})},
                     {{"data_format", format}, {"padding", std::string("VALID")}, {"strides", List{2, 2}}, {"dilations", List{1, 2}}},
                     {0, 1}});
    // Pooling: f32, a larger step, a looser tolerance.
    for (const char* op : {"MaxPool", "AvgPool"}) {
      cases.push_back({op, {spaced32(rng, nchw ? TensorShape{1, 2, 4, 4} : TensorShape{1, 4, 4, 2})},
                       {{"data_format", format}}, {0}, {}, 1e-3, 2e-2});
      cases.push_back({op, {spaced32(rng, nchw ? TensorShape{1, 2, 5, 5} : TensorShape{1, 5, 5, 2})},
                       {{"data_format", format}, {"ksize", List{3, 3}}, {"padding", std::string("SAME")}}, {0}, {}, 1e-3, 2e-2});
    }
  }
  for (const GradientCase& c : cases) check_gradient(c);
}

TEST_CASE("Gradients.errors_and_sharing") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f64, {2});
  auto y = b.add_value({.op = "ReluGrad", .inputs = {x, x}});
  auto grads = graph::gradients(b, ops::reduce_sum(b, y), std::vector<graph::ValueRef>{x});
  REQUIRE_FALSE(grads.ok());
  CHECK(grads.status().message() ==
        "gradients: cannot differentiate through node 'ReluGrad' (ReluGrad): second derivatives of Relu are not supported");

  // x used twice: contributions add up; an unconnected x gets zeros.
  graph::Graph g2;
  graph::Builder b2(g2, ops::registry());
  auto a = ops::placeholder(b2, "a", DType::f64, {2});
  auto unused = ops::placeholder(b2, "unused", DType::f64, {2});
  auto loss = ops::reduce_sum(b2, ops::mul(b2, a, a));
  auto da = graph::gradients(b2, loss, std::vector<graph::ValueRef>{a, unused});
  REQUIRE(da.ok());
  CHECK(g2.node((*da)[0].node).name.starts_with("gradients/"));
  runtime::Session session(g2, ops::kernels());
  auto out = session.run({{"a", Tensor::from<double>({2}, {3, -1})}, {"unused", Tensor::from<double>({2}, {1, 1})}},
                         std::span<const graph::ValueRef>(*da));
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<double>() == std::vector<double>{6, -2});
  CHECK((*out)[1].to_vector<double>() == std::vector<double>{0, 0});
}

TEST_CASE("Gradients.flow_through_unknown_batch_dims") {
  // The MLP's shape: a batch of unknown size, a mean loss over it.
  graph::Graph g;
  graph::Builder b(g, ops::registry(), 1);
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 4});
  auto labels = ops::placeholder(b, "labels", DType::i32, {-1});
  auto w = ops::variable(b, "w", {4, 3}, ops::Initializer::glorot_uniform());
  auto bias = ops::variable(b, "b", {3});
  auto logits = ops::bias_add(b, ops::matmul(b, ops::relu(b, x), w), bias);
  auto xent = ops::sparse_softmax_cross_entropy_with_logits(b, logits, labels);
  auto loss = ops::reduce_mean(b, xent.loss);
  auto grads = graph::gradients(b, loss, std::vector<graph::ValueRef>{w, bias});
  REQUIRE_MESSAGE(grads.ok(), grads.status().to_string());
  runtime::Session session(g, ops::kernels());
  for (int64_t batch : {0, 1, 5}) {
    std::vector<float> pixels(static_cast<size_t>(batch * 4), 0.5f);
    std::vector<int32_t> classes(static_cast<size_t>(batch), 1);
    auto out = session.run({{"x", Tensor::from<float>({batch, 4}, std::span<const float>(pixels))},
                            {"labels", Tensor::from<int32_t>({batch}, std::span<const int32_t>(classes))}},
                           {(*grads)[0], (*grads)[1]});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].type_string() == "f32[4,3]");
    CHECK((*out)[1].type_string() == "f32[3]");
  }
}

}  // namespace
}  // namespace mirra::test
