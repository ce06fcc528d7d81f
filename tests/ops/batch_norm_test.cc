// FusedBatchNormV3 and FusedBatchNormGradV3 against plain loops in double: training (the moving
// update at factors 1 and 0.3) and inference, every layout, odd sizes, a batch of one, an empty batch,
// inputs large enough to be summed in several blocks, and a large mean; at every dtype the schemas
// accept (f32, f64, and bf16 and f16 activations with f32 statistics); SyncFusedBatchNorm with given
// statistics; FusedBatchNormEx and SyncFusedBatchNorm with a side input and a ReLU, and
// FusedBatchNormGradEx, against the same loops through the ReLU; and the refusals.
#include <cmath>

#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

struct Layout {
  std::string format;
  TensorShape shape;
  int64_t outer = 1, channels = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  int64_t channel_of(int64_t i) const { return i / inner % channels; }
};

Layout layout(const std::string& format, TensorShape shape) {
  Layout l{format, shape};
  const bool first = format == "NCHW" || format == "NCDHW";
  const int c = first ? 1 : static_cast<int>(shape.rank()) - 1;
  l.channels = shape.dim(c);
  for (int d = 0; d < static_cast<int>(shape.rank()); ++d) {
    if (d < c) l.outer *= shape.dim(d);
    if (d > c) l.inner *= shape.dim(d);
  }
  return l;
}

DType param_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

// Per-channel means of f(i) over the channel's values.
std::vector<double> channel_means(const Layout& l, const std::function<double(int64_t)>& f) {
  std::vector<double> sums(static_cast<size_t>(l.channels), 0.0);
  const int64_t total = l.count() * l.channels;
  for (int64_t i = 0; i < total; ++i) sums[static_cast<size_t>(l.channel_of(i))] += f(i);
  for (double& s : sums) s /= static_cast<double>(std::max<int64_t>(l.count(), 1));
  return sums;
}

constexpr double kEpsilon = 1e-3;

struct Mode {
  bool training = true;
  double factor = 1.0;
};

// x uniform in shift +- 1, but its first `outliers` values shift + 1000.
OpCase forward_case(runtime::Random& rng, DType dtype, const Layout& l, Mode mode, double shift = 0.0,
                    int64_t outliers = 0) {
  const DType u = param_dtype(dtype);
  const Tensor uniform = random_of(rng, dtype, l.shape, shift - 1.0, shift + 1.0);
  const Tensor x = make_tensor(dtype, l.shape, [&](int64_t i) { return i < outliers ? shift + 1000.0 : element(uniform, i); });
  const TensorShape c{l.channels};
  const Tensor scale = random_of(rng, u, c, 0.5, 1.5), offset = random_of(rng, u, c);
  const Tensor given_mean = random_of(rng, u, c), given_variance = random_of(rng, u, c, 0.5, 2.0);
  const double epsilon = kEpsilon;
  std::vector<double> mean, variance, out_mean, out_variance;
  if (mode.training) {
    mean = channel_means(l, [&](int64_t i) { return element(x, i); });
    variance = channel_means(l, [&](int64_t i) {
      const double d = element(x, i) - mean[static_cast<size_t>(l.channel_of(i))];
      return d * d;
    });
    const double n = static_cast<double>(l.count());
    for (int64_t k = 0; k < l.channels; ++k) {
      const size_t s = static_cast<size_t>(k);
      const double batch_mean = l.count() == 0 ? NAN : mean[s];
      const double batch_variance = l.count() == 0 ? NAN : variance[s] * n / std::max(n - 1, 1.0);
      out_mean.push_back((1 - mode.factor) * element(given_mean, k) + mode.factor * batch_mean);
      out_variance.push_back((1 - mode.factor) * element(given_variance, k) + mode.factor * batch_variance);
    }
  } else {
    for (int64_t k = 0; k < l.channels; ++k) {
      mean.push_back(element(given_mean, k));
      variance.push_back(element(given_variance, k));
    }
    out_mean = mean;
    out_variance = variance;
  }
  const auto at = [](const std::vector<double>& v) { return [&v](int64_t k) { return v[static_cast<size_t>(k)]; }; };
  Tensor y = make_tensor(dtype, l.shape, [&](int64_t i) {
    const size_t k = static_cast<size_t>(l.channel_of(i));
    return (element(x, i) - mean[k]) / std::sqrt(variance[k] + epsilon) * element(scale, static_cast<int64_t>(k)) +
           element(offset, static_cast<int64_t>(k));
  });
  return OpCase{{x, scale, offset, given_mean, given_variance},
                {{"epsilon", epsilon}, {"exponential_avg_factor", mode.factor}, {"data_format", l.format},
                 {"is_training", mode.training}},
                {y, make_tensor(u, c, at(out_mean)), make_tensor(u, c, at(out_variance)), make_tensor(u, c, at(mean)),
                 make_tensor(u, c, at(variance)), make_tensor(u, {0}, [](int64_t) { return 0.0; })}};
}

// FusedBatchNormGradV3's outputs for these inputs, in double.
std::vector<Tensor> backward_expected(const Tensor& dy, const Tensor& x, const Tensor& scale, const Tensor& mean,
                                      const Tensor& variance, const Layout& l, bool training) {
  const DType u = param_dtype(x.dtype());
  const TensorShape c{l.channels};
  const auto centred = [&](int64_t i) { return element(x, i) - element(mean, l.channel_of(i)); };
  const std::vector<double> mean_dy = channel_means(l, [&](int64_t i) { return element(dy, i); });
  const std::vector<double> mean_dy_xc = channel_means(l, [&](int64_t i) { return element(dy, i) * centred(i); });
  const auto inv = [&](int64_t k) { return 1.0 / std::sqrt(element(variance, k) + kEpsilon); };
  const double n = static_cast<double>(l.count());
  Tensor dx = make_tensor(x.dtype(), l.shape, [&](int64_t i) {
    const int64_t k = l.channel_of(i);
    const double a = element(scale, k) * inv(k);
    if (!training) return a * element(dy, i);
    return a * (element(dy, i) - mean_dy[static_cast<size_t>(k)] -
                centred(i) * inv(k) * inv(k) * mean_dy_xc[static_cast<size_t>(k)]);
  });
  Tensor dscale = make_tensor(u, c, [&](int64_t k) { return mean_dy_xc[static_cast<size_t>(k)] * n * inv(k); });
  Tensor doffset = make_tensor(u, c, [&](int64_t k) { return mean_dy[static_cast<size_t>(k)] * n; });
  const Tensor zero = make_tensor(u, {}, [](int64_t) { return 0.0; });
  return {dx, dscale, doffset, zero, zero};
}

OpCase backward_case(runtime::Random& rng, DType dtype, const Layout& l, bool training) {
  const DType u = param_dtype(dtype);
  const Tensor dy = random_of(rng, dtype, l.shape), x = random_of(rng, dtype, l.shape);
  const TensorShape c{l.channels};
  const Tensor scale = random_of(rng, u, c, 0.5, 1.5), mean = random_of(rng, u, c, -0.2, 0.2);
  const Tensor variance = random_of(rng, u, c, 0.5, 2.0);
  return OpCase{{dy, x, scale, mean, variance, make_tensor(u, {0}, [](int64_t) { return 0.0; })},
                {{"epsilon", kEpsilon}, {"data_format", l.format}, {"is_training", training}},
                backward_expected(dy, x, scale, mean, variance, l, training)};
}

// SyncFusedBatchNorm: in training the given batch statistics, taken over `count` values, normalise.
OpCase synchronised_case(runtime::Random& rng, DType dtype, const Layout& l, Mode mode, double count) {
  const DType u = param_dtype(dtype);
  const Tensor x = random_of(rng, dtype, l.shape);
  const TensorShape c{l.channels};
  const Tensor scale = random_of(rng, u, c, 0.5, 1.5), offset = random_of(rng, u, c);
  const Tensor moving_mean = random_of(rng, u, c), moving_variance = random_of(rng, u, c, 0.5, 2.0);
  const Tensor batch_mean = random_of(rng, u, c), batch_variance = random_of(rng, u, c, 0.5, 2.0);
  const double epsilon = kEpsilon;
  const Tensor& mean = mode.training ? batch_mean : moving_mean;
  const Tensor& variance = mode.training ? batch_variance : moving_variance;
  const auto moved = [&](const Tensor& old, const Tensor& batch, double correction) {
    return make_tensor(u, c, [&](int64_t k) {
      if (!mode.training) return element(old, k);
      return (1 - mode.factor) * element(old, k) + mode.factor * element(batch, k) * correction;
    });
  };
  Tensor y = make_tensor(dtype, l.shape, [&](int64_t i) {
    const int64_t k = l.channel_of(i);
    return (element(x, i) - element(mean, k)) / std::sqrt(element(variance, k) + epsilon) * element(scale, k) + element(offset, k);
  });
  return OpCase{{x, scale, offset, moving_mean, moving_variance, batch_mean, batch_variance,
                 make_tensor(u, {}, [&](int64_t) { return count; })},
                {{"epsilon", epsilon}, {"exponential_avg_factor", mode.factor}, {"data_format", l.format},
                 {"is_training", mode.training}},
                {y, moved(moving_mean, batch_mean, 1.0), moved(moving_variance, batch_variance, count / std::max(count - 1, 1.0)),
                 as_dtype(mean, u), as_dtype(variance, u), make_tensor(u, {0}, [](int64_t) { return 0.0; })}};
}

// What a side input and a ReLU make of a forward case's y (output 0): relu(y + side) where `relu`,
// with the side input appended to the inputs where given.
struct Epilogue {
  bool side_input = false, relu = false;
};

OpCase with_epilogue(runtime::Random& rng, OpCase c, Epilogue e) {
  const bool side_input = e.side_input, relu = e.relu;
  const Tensor y = c.expected[0];
  const Tensor side = random_of(rng, y.dtype(), y.shape());
  if (side_input) c.inputs.push_back(side);
  c.attrs.set("activation", std::string(relu ? "relu" : "none"));
  c.expected[0] = make_tensor(y.dtype(), y.shape(), [&](int64_t i) {
    const double v = element(y, i) + (side_input ? element(side, i) : 0.0);
    return relu ? std::max(v, 0.0) : v;
  });
  return c;
}

// FusedBatchNormGradEx: the upstream dy reaches the normalisation where y (the ReLU's output, about
// half of it zero) is positive; output 5 holds what reached it, where asked.
OpCase through_relu_case(runtime::Random& rng, DType dtype, const Layout& l, bool training, bool side_input_backprop) {
  OpCase c = backward_case(rng, dtype, l, training);
  const Tensor upstream = c.inputs[0];
  const Tensor y = make_tensor(dtype, l.shape, [&](int64_t) { return rng.uniform() < 0.5 ? 0.0 : 0.5 + rng.uniform(); });
  const Tensor reached = make_tensor(dtype, l.shape, [&](int64_t i) { return element(y, i) > 0 ? element(upstream, i) : 0.0; });
  c.inputs.push_back(y);
  c.attrs.set("activation", std::string("relu"));
  c.attrs.set("side_input_backprop", side_input_backprop);
  c.expected = backward_expected(reached, c.inputs[1], c.inputs[2], c.inputs[3], c.inputs[4], l, training);
  c.expected.push_back(side_input_backprop ? reached : make_tensor(dtype, {0}, [](int64_t) { return 0.0; }));
  return c;
}

std::vector<Layout> layouts() {
  return {layout("NHWC", {2, 3, 4, 5}),  layout("NCHW", {2, 3, 4, 5}),   layout("NHWC", {3, 5, 7, 1}),
          layout("NHWC", {1, 1, 1, 3}),  layout("NCHW", {1, 3, 1, 1}),   layout("NHWC", {0, 2, 2, 3}),
          layout("NCHW", {0, 3, 2, 2}),  layout("NDHWC", {2, 2, 3, 2, 3}), layout("NCDHW", {2, 3, 2, 2, 3}),
          layout("NHWC", {8, 16, 16, 32}),  // several blocks of rows
          layout("NCHW", {4, 8, 64, 64})};  // a block per image, a task per channel
}

TEST_CASE("Kernels.FusedBatchNormV3.matches_the_loops_in_training_and_inference") {
  runtime::Random rng(31);
  for (const Layout& l : layouts()) {
    for (Mode mode : {Mode{true, 1.0}, Mode{true, 0.3}, Mode{false, 1.0}}) {
      CAPTURE(l.format); CAPTURE(l.shape.to_string()); CAPTURE(mode.training); CAPTURE(mode.factor);
      check_op_at_every_dtype("FusedBatchNormV3", [&](DType dtype) { return forward_case(rng, dtype, l, mode); });
    }
  }
}

TEST_CASE("Kernels.SyncFusedBatchNorm.normalises_with_the_given_batch_statistics") {
  runtime::Random rng(34);
  for (const Layout& l : {layout("NHWC", {2, 3, 4, 5}), layout("NCHW", {3, 2, 2, 3}), layout("NHWC", {0, 2, 2, 3})}) {
    for (Mode mode : {Mode{true, 1.0}, Mode{true, 0.3}, Mode{false, 1.0}}) {
      for (double count : {1.0, 17.0}) {  // one value per channel: the variance is not corrected
        CAPTURE(l.format); CAPTURE(l.shape.to_string()); CAPTURE(mode.training); CAPTURE(count);
        check_op_at_every_dtype("SyncFusedBatchNorm", [&](DType dtype) { return synchronised_case(rng, dtype, l, mode, count); });
      }
    }
  }
}

TEST_CASE("Kernels.FusedBatchNormEx.adds_the_side_input_and_applies_the_relu") {
  runtime::Random rng(35);
  for (const Layout& l : {layout("NHWC", {2, 3, 4, 5}), layout("NCHW", {2, 3, 4, 5}), layout("NHWC", {0, 2, 2, 3}),
                          layout("NHWC", {8, 16, 16, 32})}) {
    for (Mode mode : {Mode{true, 1.0}, Mode{true, 0.3}, Mode{false, 1.0}}) {
      for (const Epilogue e : {Epilogue{true, true}, Epilogue{false, true}, Epilogue{true, false}}) {
        CAPTURE(l.format); CAPTURE(l.shape.to_string()); CAPTURE(mode.training); CAPTURE(e.side_input); CAPTURE(e.relu);
        check_op_at_every_dtype("FusedBatchNormEx", [&](DType dtype) {
          return with_epilogue(rng, forward_case(rng, dtype, l, mode), e);
        });
        if (!mode.training || mode.factor != 1.0) continue;
        check_op_at_every_dtype("SyncFusedBatchNorm", [&](DType dtype) {
          return with_epilogue(rng, synchronised_case(rng, dtype, l, mode, 17.0), e);
        });
      }
    }
  }
}

TEST_CASE("Kernels.FusedBatchNormGradEx.passes_the_gradient_where_the_relu_did") {
  runtime::Random rng(36);
  for (const Layout& l : {layout("NHWC", {2, 3, 4, 5}), layout("NCHW", {2, 3, 4, 5}), layout("NHWC", {0, 2, 2, 3}),
                          layout("NHWC", {8, 16, 16, 32})}) {
    for (bool training : {true, false}) {
      for (bool side_input_backprop : {false, true}) {
        CAPTURE(l.format); CAPTURE(l.shape.to_string()); CAPTURE(training); CAPTURE(side_input_backprop);
        check_op_at_every_dtype("FusedBatchNormGradEx", [&](DType dtype) {
          return through_relu_case(rng, dtype, l, training, side_input_backprop);
        });
      }
    }
  }
}

TEST_CASE("Kernels.FusedBatchNormV3.a_large_mean_costs_no_precision") {
  // Values 1000 +- 1 in f32: a one-pass sum of squares loses most digits of the variance there.
  runtime::Random rng(32);
  const OpCase c = forward_case(rng, DType::f32, layout("NHWC", {16, 8, 8, 4}), {}, 1000.0);
  check_op("FusedBatchNormV3", c.inputs, c.attrs, c.expected, 1e-4);
}

TEST_CASE("Kernels.FusedBatchNormV3.outliers_where_the_kernel_takes_its_shift") {
  // The kernel sums deviations from the mean of a few of each channel's first values: here some of
  // those are 1000 away from the rest (1000 +- 1), and the result is still the two-pass loop's to
  // within its own rounding.
  runtime::Random rng(34);
  for (const Layout& l : {layout("NHWC", {16, 8, 8, 4}), layout("NCHW", {16, 4, 8, 8})}) {
    CAPTURE(l.format);
    const OpCase c = forward_case(rng, DType::f64, l, {}, 1000.0, /*outliers=*/64);
    check_op("FusedBatchNormV3", c.inputs, c.attrs, c.expected, 1e-10);
  }
}

TEST_CASE("Kernels.FusedBatchNormGradV3.matches_the_loops") {
  runtime::Random rng(33);
  for (const Layout& l : layouts()) {
    for (bool training : {true, false}) {
      CAPTURE(l.format); CAPTURE(l.shape.to_string()); CAPTURE(training);
      check_op_at_every_dtype("FusedBatchNormGradV3", [&](DType dtype) { return backward_case(rng, dtype, l, training); });
    }
  }
}

// What the builder says of a FusedBatchNormV3 over x, with `scale` for scale and offset and `mean`
// for the given mean and variance: empty when it accepts the node.
std::string refusal(const graph::TensorType& x, const graph::TensorType& scale, const graph::TensorType& mean,
                    const ops::BatchNormOptions& options = {}) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const auto in = ops::placeholder(b, "x", x.dtype, x.shape);
  const auto s = ops::placeholder(b, "scale", scale.dtype, scale.shape);
  const auto m = ops::placeholder(b, "mean", mean.dtype, mean.shape);
  ops::fused_batch_norm(b, in, s, s, m, m, options);
  return b.status().ok() ? "" : b.status().message();
}

TEST_CASE("Kernels.FusedBatchNormV3.refuses_what_it_cannot_normalise") {
  const graph::TensorType x{DType::f32, {-1, 4, 4, 3}}, c3{DType::f32, {3}}, empty{DType::f32, {0}};
  const auto refused = [](const std::string& message, const std::string& words) {
    CHECK_MESSAGE(message.find(words) != std::string::npos, message);
  };
  refused(refusal({DType::f32, {2, 3}}, c3, c3), "x must be 4-D with data_format NHWC or NCHW, or 5-D");
  refused(refusal(x, c3, c3, {.data_format = "NCDHW"}), "got rank 4 and NCDHW");
  refused(refusal(x, {DType::f32, {2}}, c3), "scale must have the same number of elements as the channels of x, got 2 and 3");
  refused(refusal(x, c3, empty, {.is_training = false}), "mean must have the same number of elements as the channels of x");
  refused(refusal(x, c3, empty, {.exponential_avg_factor = 0.5}), "mean must have the same number of elements");
  refused(refusal(x, {DType::f64, {3}}, c3), "scale must be f32 for this x");
  refused(refusal({DType::f64, {1, 2, 2, 3}}, c3, c3), "scale must be f64 for this x");
  refused(refusal(x, c3, c3, {.exponential_avg_factor = 1.5}), "exponential_avg_factor must be in [0, 1]");
  refused(refusal(x, c3, c3, {.epsilon = -1}), "epsilon must not be negative");
  refused(refusal({DType::i32, {1, 2, 2, 3}}, c3, c3), "i32");
  // Training with a factor of 1 needs no given statistics.
  CHECK(refusal(x, c3, empty) == "");
  CHECK(refusal({DType::bf16, {2, 3, 4, 4}}, c3, c3, {.data_format = "NCHW"}) == "");
}

}  // namespace
}  // namespace mirra::test
