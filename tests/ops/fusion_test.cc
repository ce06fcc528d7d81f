// FusedConv2D against Conv2D + bias + ReLU computed separately, MaxPoolGrad through a ReLU against
// MaxPoolGrad then ReluGrad, MaxPoolGrad's channel sums against its output summed per channel; the
// fusion passes on a training graph: the replaced nodes never run, and training gives the same
// weights (a residual block's batch normalisations fused with their ReLU and sum included, and zero
// padding folded into the convolutions that read it).
#include <algorithm>
#include <set>

#include "graph/verify.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

TEST_CASE("Kernels.FusedConv2D.matches_conv_then_bias_then_relu") {
  runtime::Random rng(12);
  for (const char* format : {"NHWC", "NCHW"}) {
    for (const char* activation : {"relu", "none"}) {
      CAPTURE(format);
      CAPTURE(activation);
      const bool nchw = std::string_view(format) == "NCHW";
      const Tensor input = random_tensor<float>(rng, nchw ? TensorShape{2, 3, 6, 5} : TensorShape{2, 6, 5, 3});
      const Tensor filter = random_tensor<float>(rng, {3, 3, 3, 4});
      const Tensor bias = random_tensor<float>(rng, {4});
      const AttrMap conv_attrs = {{"padding", std::string("SAME")}, {"data_format", std::string(format)}};
      auto conv = run_op("Conv2D", {input, filter}, conv_attrs);
      REQUIRE(conv.ok());
      const Tensor& y = (*conv)[0];
      const Tensor expected = make_tensor(DType::f32, y.shape(), [&](int64_t i) {
        const int64_t channel = nchw ? i / (y.dim(2) * y.dim(3)) % 4 : i % 4;
        const double value = element(y, i) + element(bias, channel);
        return std::string_view(activation) == "relu" ? std::max(value, 0.0) : value;
      });
      AttrMap attrs = conv_attrs;
      attrs.set("activation", std::string(activation));
      check_op("FusedConv2D", {input, filter, bias}, attrs, {expected}, 1e-5);
    }
  }
  checked_ops().insert("FusedConv2D");
}

// At every dtype its schema accepts, against a direct convolution loop: the bias of the output's
// dtype, and f32 (which a 16-bit output may also take).
TEST_CASE("Kernels.FusedConv2D.at_every_dtype") {
  runtime::Random rng(13);
  for (const bool f32_bias : {false, true}) {
    for (const char* format : {"NHWC", "NCHW"}) {
      CAPTURE(f32_bias);
      CAPTURE(format);
      const bool nchw = std::string_view(format) == "NCHW";
      const int64_t n = 2, h = 5, w = 4, c = 3, k = 4;  // 3x3 window, SAME, stride 1
      check_op_at_every_dtype("FusedConv2D", [&](DType dtype) {
        const Tensor input = random_of(rng, dtype, nchw ? TensorShape{n, c, h, w} : TensorShape{n, h, w, c});
        const Tensor filter = random_of(rng, dtype, {3, 3, c, k});
        const Tensor bias = random_of(rng, f32_bias ? DType::f32 : dtype, {k});
        const TensorShape out_shape = nchw ? TensorShape{n, k, h, w} : TensorShape{n, h, w, k};
        const auto at = [&](int64_t b, int64_t y, int64_t x, int64_t ch) {
          return element(input, nchw ? ((b * c + ch) * h + y) * w + x : ((b * h + y) * w + x) * c + ch);
        };
        const Tensor expected = make_tensor(dtype, out_shape, [&](int64_t i) {
          const auto idx = unravel(i, out_shape.to_vector());
          const int64_t b = idx[0], y = nchw ? idx[2] : idx[1], x = nchw ? idx[3] : idx[2], o = nchw ? idx[1] : idx[3];
          double sum = element(bias, o);
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = y + ky - 1, ix = x + kx - 1;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              for (int64_t ch = 0; ch < c; ++ch) sum += at(b, iy, ix, ch) * element(filter, ((ky * 3 + kx) * c + ch) * k + o);
            }
          }
          return std::max(sum, 0.0);
        });
        return OpCase{{input, filter, bias},
                      {{"padding", std::string("SAME")}, {"data_format", std::string(format)}, {"activation", std::string("relu")}},
                      {expected},
                      dtype == DType::f32 ? std::optional(1e-5) : std::nullopt};
      });
    }
  }
}

// Every geometry MaxPoolGrad's kernel has a path for: the 2x2 stride-2 NHWC one (also with an odd
// width and height, and an empty batch), the general NHWC one (overlapping SAME windows) and NCHW.
struct PoolCase {
  TensorShape input;
  std::vector<int64_t> ksize, strides;
  const char* padding;
  const char* format;

  AttrMap attrs() const {
    return {{"ksize", ksize}, {"strides", strides}, {"padding", std::string(padding)}, {"data_format", std::string(format)}};
  }
};

const PoolCase kPoolCases[] = {{{2, 6, 8, 5}, {2, 2}, {2, 2}, "VALID", "NHWC"}, {{2, 7, 5, 3}, {2, 2}, {2, 2}, "VALID", "NHWC"},
                               {{0, 4, 4, 2}, {2, 2}, {2, 2}, "VALID", "NHWC"}, {{2, 7, 6, 4}, {3, 3}, {2, 2}, "SAME", "NHWC"},
                               {{2, 3, 6, 6}, {2, 2}, {2, 2}, "VALID", "NCHW"}};

// An input as a ReLU leaves it: half the elements are its zeros, with ties, and some windows hold
// nothing else.
Tensor relu_output(runtime::Random& rng, const TensorShape& shape) {
  const Tensor raw = random_tensor<float>(rng, shape);
  return make_tensor(DType::f32, shape, [&](int64_t i) { return std::max(element(raw, i), 0.0); });
}

// A gradient for the pooled `y`.
Tensor pooled_gradient(runtime::Random& rng, const Tensor& y, const PoolCase& c) {
  auto pooled = run_op("MaxPool", {y}, c.attrs());
  REQUIRE(pooled.ok());
  return random_tensor<float>(rng, (*pooled)[0].shape());
}

TEST_CASE("Kernels.MaxPoolGrad.through_relu_matches_max_pool_grad_then_relu_grad") {
  runtime::Random rng(13);
  for (const PoolCase& c : kPoolCases) {
    CAPTURE(c.format);
    CAPTURE(c.padding);
    const Tensor y = relu_output(rng, c.input);
    const Tensor dy = pooled_gradient(rng, y, c);
    auto unfused = run_op("MaxPoolGrad", {y, dy}, c.attrs());
    REQUIRE(unfused.ok());
    auto expected = run_op("ReluGrad", {(*unfused)[0], y}, {});
    REQUIRE(expected.ok());
    AttrMap fused = c.attrs();
    fused.set("through_relu", true);
    check_op("MaxPoolGrad", {y, dy}, fused, {(*expected)[0]}, 0.0);
  }
}

// MaxPoolGrad with channel_sums: output 0 as without, output 1 that output summed over all but the
// channel dim, with and without through_relu.
TEST_CASE("Kernels.MaxPoolGrad.channel_sums_are_the_gradient_summed_per_channel") {
  runtime::Random rng(14);
  for (const PoolCase& c : kPoolCases) {
    for (bool through_relu : {false, true}) {
      CAPTURE(c.format);
      CAPTURE(c.padding);
      CAPTURE(through_relu);
      const bool nchw = std::string_view(c.format) == "NCHW";
      const Tensor y = relu_output(rng, c.input);
      const Tensor dy = pooled_gradient(rng, y, c);
      AttrMap attrs = c.attrs();
      attrs.set("through_relu", through_relu);
      auto gradient = run_op("MaxPoolGrad", {y, dy}, attrs);
      REQUIRE(gradient.ok());
      const Tensor& dx = (*gradient)[0];
      const int64_t channels = c.input.dim(nchw ? 1 : 3), inner = nchw ? c.input.dim(2) * c.input.dim(3) : 1;
      std::vector<double> sums(static_cast<size_t>(channels), 0.0);
      for (int64_t i = 0; i < dx.num_elements(); ++i) sums[static_cast<size_t>(i / inner % channels)] += element(dx, i);
      attrs.set("channel_sums", true);
      check_op("MaxPoolGrad", {y, dy}, attrs,
               {dx, make_tensor(DType::f32, {channels}, [&](int64_t i) { return sums[static_cast<size_t>(i)]; })}, 1e-5);
    }
  }
}

// A conv layer with a ReLU (then, with `pool`, a 2x2 max pool) and a dense head with SGD momentum;
// `fuse`, when given, rewrites the graph after minimize() and must make `fusions` fusions.
struct ConvNet {
  graph::Graph graph;
  graph::NodeId train = graph::kInvalidNode;
};

using Fusion = int (*)(graph::Graph&);

// The forward fusion and the MaxPoolGrad-through-ReLU one, without the bias gradient's.
int fuse_chains(graph::Graph& g) { return ops::fuse_conv_bias_relu(g) + ops::fuse_max_pool_grad_relu_grad(g); }

ConvNet conv_net(Fusion fuse, int fusions, bool pool) {
  ConvNet net;
  graph::Builder b(net.graph, ops::registry(), 4);
  auto images = ops::placeholder(b, "images", DType::f32, {-1, 6, 6, 2});
  auto filter = ops::variable(b, "filter", {3, 3, 2, 3}, ops::Initializer::glorot_uniform());
  auto bias = ops::variable(b, "bias", {3}, ops::Initializer::constant(pool ? -0.05 : 0.05));
  auto x = ops::relu(b, ops::bias_add(b, ops::conv2d(b, images, filter, {.padding = "SAME"}), bias));
  int64_t features = 6 * 6 * 3;
  if (pool) {
    x = ops::max_pool(b, x, {.ksize = {2, 2}, .strides = {2, 2}, .padding = "VALID"});
    features = 3 * 3 * 3;
  }
  auto w = ops::variable(b, "w", {features, 4}, ops::Initializer::glorot_uniform());
  auto objective = ops::classifier_objective(b, ops::matmul(b, ops::reshape(b, x, {-1, features}), w));
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.1, 0.9));
  REQUIRE(train.ok());
  net.train = train->train;
  if (fuse != nullptr) CHECK(fuse(net.graph) == fusions);
  const std::vector<graph::NodeId> run = {net.train};
  const graph::Status valid = graph::verify_types(net.graph, ops::registry(), run);
  CHECK_MESSAGE(valid.ok(), valid.to_string());
  return net;
}

// Five training steps: the ops the last one ran and the trained weights.
struct Trained {
  std::multiset<std::string> ran;
  std::map<std::string, std::vector<float>> weights;
};

// Five steps of `train` on `images` (5 of them) and fixed labels: the ops the last step ran, and the
// f32 variables named in `weights` (empty: every one).
Trained train_five_steps(const graph::Graph& graph, graph::NodeId train, const Tensor& images,
                         const std::vector<std::string>& weights = {}) {
  const Tensor labels = Tensor::from<int64_t>({5}, {0, 1, 2, 3, 1});
  runtime::Session session(graph, ops::kernels(), {.trace = true});
  for (int step = 0; step < 5; ++step) {
    REQUIRE(session.run({{"images", images}, {"labels", labels}}, {}, {train}).ok());
  }
  Trained trained;
  for (const runtime::NodeTiming& t : session.last_timeline()) trained.ran.insert(graph.node(t.node).op);
  for (const std::string& name : weights.empty() ? session.variables().names() : weights) {
    const Tensor value = *session.variables().find(name);
    if (value.dtype() == DType::f32) trained.weights[name] = value.to_vector<float>();
  }
  return trained;
}

Trained train(Fusion fuse, int fusions, bool pool) {
  runtime::Random rng(2);
  const Tensor images = random_tensor<float>(rng, {5, 6, 6, 2});
  const ConvNet net = conv_net(fuse, fusions, pool);
  return train_five_steps(net.graph, net.train, images, {"filter", "bias", "w"});
}

TEST_CASE("Fusion.conv_bias_relu_trains_like_the_unfused_graph") {
  const Trained unfused = train(nullptr, 0, false), fused = train(ops::fuse_for_training, 1, false);
  for (const char* op : {"Conv2D", "BiasAdd", "Relu"}) {
    CHECK(unfused.ran.count(op) == 1u);
    CHECK(fused.ran.count(op) == 0u);
  }
  CHECK(fused.ran.count("FusedConv2D") == 1u);
  for (const auto& entry : unfused.weights) {
    const std::string& name = entry.first;
    CAPTURE(name);
    for (size_t i = 0; i < entry.second.size(); ++i) {
      CHECK(fused.weights.at(name)[i] == doctest::Approx(entry.second[i]).epsilon(1e-5));
    }
  }
}

// With a max pool after the ReLU: a MaxPoolGrad through the ReLU replaces MaxPoolGrad and ReluGrad,
// and training gives the weights of the graph without that fusion bit for bit (selection only, no new
// arithmetic). Both have the forward fusion: oneDNN may sum a convolution with a bias in another
// order than one without, by CPU.
TEST_CASE("Fusion.max_pool_grad_through_relu_trains_like_the_unfused_graph") {
  const Trained relu_grad_apart = train(ops::fuse_conv_bias_relu, 1, true), fused = train(fuse_chains, 2, true);
  CHECK(relu_grad_apart.ran.count("ReluGrad") == 1u);
  CHECK(fused.ran.count("ReluGrad") == 0u);
  CHECK(fused.ran.count("MaxPoolGrad") == 1u);
  CHECK(fused.weights == relu_grad_apart.weights);
}

// Then the bias gradient: the MaxPoolGrad sums it, the ReduceSum over its output (now an Identity)
// no longer sweeps it, and training gives the same weights up to the order of that sum.
TEST_CASE("Fusion.max_pool_grad_sums_the_bias_gradient") {
  const Trained chained = train(fuse_chains, 2, true), fused = train(ops::fuse_for_training, 3, true);
  CHECK(fused.ran.count("ReduceSum") + 1 == chained.ran.count("ReduceSum"));
  CHECK(fused.ran.count("Identity") == chained.ran.count("Identity") + 1);
  for (const auto& entry : chained.weights) {
    const std::string& name = entry.first;
    CAPTURE(name);
    for (size_t i = 0; i < entry.second.size(); ++i) {
      CHECK(fused.weights.at(name)[i] == doctest::Approx(entry.second[i]).epsilon(1e-5));
    }
  }
}

// A residual block: conv -> batch norm -> ReLU -> conv -> batch norm, + the first ReLU's output, ->
// ReLU, then a dense head; five steps of SGD momentum, the moving statistics updated. With `fuse` the
// batch normalisations are fused with what follows them, forward and backward.
Trained train_residual_block(bool fuse) {
  graph::Graph graph;
  graph::Builder b(graph, ops::registry(), 5);
  auto images = ops::placeholder(b, "images", DType::f32, {-1, 6, 6, 2});
  std::vector<graph::NodeId> state_updates;
  const auto conv_bn = [&](const std::string& name, graph::ValueRef x, int64_t in) {
    auto scope = b.scope(name);
    auto filter = ops::variable(b, "filter", {3, 3, in, 3}, ops::Initializer::glorot_uniform());
    ops::BatchNormalization bn = ops::batch_normalization(b, ops::conv2d(b, x, filter, {.padding = "SAME"}));
    state_updates.insert(state_updates.end(), bn.state_updates.begin(), bn.state_updates.end());
    return bn.y;
  };
  auto first = ops::relu(b, conv_bn("conv1", images, 2));
  auto block = ops::relu(b, ops::add(b, conv_bn("conv2", first, 3), first));
  auto w = ops::variable(b, "w", {6 * 6 * 3, 4}, ops::Initializer::glorot_uniform());
  auto objective = ops::classifier_objective(b, ops::matmul(b, ops::reshape(b, block, {-1, 6 * 6 * 3}), w));
  auto train = ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.1, 0.9), {.state_updates = state_updates});
  REQUIRE(train.ok());
  if (fuse) {
    CHECK(ops::fuse_batch_norm_activation(graph) == 2);
    CHECK(ops::fuse_batch_norm_grad_activation(graph) == 2);
  }
  const std::vector<graph::NodeId> run = {train->train};
  const graph::Status valid = graph::verify_types(graph, ops::registry(), run);
  CHECK_MESSAGE(valid.ok(), valid.to_string());

  runtime::Random rng(3);
  return train_five_steps(graph, train->train, random_tensor<float>(rng, {5, 6, 6, 2}));
}

TEST_CASE("Fusion.batch_norm_with_relu_and_residual_sum_trains_like_the_unfused_graph") {
  const Trained unfused = train_residual_block(false), fused = train_residual_block(true);
  for (const char* op : {"FusedBatchNormV3", "FusedBatchNormGradV3", "Relu", "ReluGrad"}) {
    CHECK(unfused.ran.count(op) == 2u);
    CHECK(fused.ran.count(op) == 0u);
  }
  CHECK(fused.ran.count("FusedBatchNormEx") == 2u);
  CHECK(fused.ran.count("FusedBatchNormGradEx") == 2u);
  REQUIRE(fused.weights.size() == unfused.weights.size());
  for (const auto& entry : unfused.weights) {
    const std::string& name = entry.first;
    CAPTURE(name);
    for (size_t i = 0; i < entry.second.size(); ++i) {
      CHECK(fused.weights.at(name)[i] == doctest::Approx(entry.second[i]).epsilon(1e-5));
    }
  }
}

// A Pad of zeros read by a VALID convolution (the ResNets' symmetric padding; with stride 2 and more
// after than before too, in NHWC and NCHW) trains as the convolution with that padding EXPLICIT: the
// Pad and the Slice of its gradient no longer run (the convolution's gradients read the unpadded
// value, the input's is the unpadded value's), and the weights are those of the padded graph. A Pad
// that something else reads too is left as it is.
struct PaddedConv {
  std::vector<int64_t> paddings;  // NHWC order
  int64_t stride = 1;
  bool nchw = false;
  bool also_read = false;  // a ReLU reads the padded value too
};

Trained train_padded(const PaddedConv& c, bool fold) {
  graph::Graph graph;
  graph::Builder b(graph, ops::registry(), 5);
  auto images = ops::placeholder(b, "images", DType::f32, {-1, 7, 7, 2});
  auto filter = ops::variable(b, "filter", {3, 3, 2, 3}, ops::Initializer::glorot_uniform());
  // A 1x1 convolution first, so that the gradient flows through the Pad (a Slice of the padded gradient).
  auto mixing = ops::variable(b, "mixing", {1, 1, 2, 2}, ops::Initializer::glorot_uniform());
  graph::ValueRef x = ops::conv2d(b, images, mixing);
  if (c.nchw) x = ops::transpose(b, x, {0, 3, 1, 2});
  std::vector<int64_t> paddings = c.paddings;
  if (c.nchw) paddings = {c.paddings[0], c.paddings[1], c.paddings[6], c.paddings[7], c.paddings[2], c.paddings[3], c.paddings[4], c.paddings[5]};
  auto padded = ops::pad(b, x, paddings);
  auto y = ops::relu(b, ops::conv2d(b, padded, filter,
                                    {.strides = {c.stride, c.stride}, .padding = "VALID", .data_format = c.nchw ? "NCHW" : "NHWC"}));
  graph::ValueRef features = ops::reduce_mean(b, y, ops::Axes({c.nchw ? 2 : 1, c.nchw ? 3 : 2}));
  if (c.also_read) features = ops::add(b, features, ops::reduce_mean(b, ops::relu(b, padded)));
  auto w = ops::variable(b, "w", {3, 4}, ops::Initializer::glorot_uniform());
  auto objective = ops::classifier_objective(b, ops::matmul(b, features, w));
  auto train_op = ops::minimize(b, objective.loss, ops::Optimizer::momentum_sgd(0.1, 0.9));
  REQUIRE_MESSAGE(train_op.ok(), train_op.status().to_string());
  if (fold) CHECK(ops::fold_padding_into_convolutions(graph) == (c.also_read ? 0 : 1));
  const std::vector<graph::NodeId> run = {train_op->train};
  const graph::Status valid = graph::verify_types(graph, ops::registry(), run);
  REQUIRE_MESSAGE(valid.ok(), valid.to_string());
  runtime::Random rng(3);
  return train_five_steps(graph, train_op->train, random_tensor<float>(rng, {5, 7, 7, 2}), {"mixing", "filter", "w"});
}

TEST_CASE("Fusion.zero_padding_folds_into_the_convolutions_that_read_it") {
  for (const PaddedConv& c : {PaddedConv{.paddings = {0, 0, 1, 1, 1, 1, 0, 0}},
                              PaddedConv{.paddings = {0, 0, 0, 1, 2, 1, 0, 0}, .stride = 2},
                              PaddedConv{.paddings = {0, 0, 1, 1, 1, 1, 0, 0}, .stride = 2, .nchw = true},
                              PaddedConv{.paddings = {0, 0, 1, 1, 1, 1, 0, 0}, .also_read = true}}) {
    CAPTURE(c.stride);
    CAPTURE(c.nchw);
    CAPTURE(c.also_read);
    const Trained padded = train_padded(c, false), folded = train_padded(c, true);
    CHECK(padded.ran.count("Pad") == 1u);
    CHECK(folded.ran.count("Pad") == (c.also_read ? 1u : 0u));
    CHECK(folded.ran.count("Slice") + (c.also_read ? 0u : 1u) == padded.ran.count("Slice"));
    for (const auto& entry : padded.weights) {
      const std::string& name = entry.first;
      CAPTURE(name);
      for (size_t i = 0; i < entry.second.size(); ++i) {
        CHECK(folded.weights.at(name)[i] == doctest::Approx(entry.second[i]).epsilon(1e-5));
      }
    }
  }
}

}  // namespace
}  // namespace mirra::test
