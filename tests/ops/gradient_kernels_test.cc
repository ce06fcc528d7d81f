// The ops that gradients use (ReluGrad, SumToShape, ZerosLike, ReshapeLike, Conv2DBackpropInput,
// Conv2DBackpropFilter, MaxPoolGrad, AvgPoolGrad) against plain scatter loops, at every dtype their
// schemas accept; the pooling gradients on mixed bf16 and f32 operands against their f32 kernels.
#include <cmath>

#include "ops/shape_inference.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

using List = std::vector<int64_t>;

TEST_CASE("Kernels.ReluGrad_ZerosLike_ReshapeLike") {
  runtime::Random rng(40);
  for (const TensorShape& shape : {TensorShape{0, 3}, TensorShape{5, 7}}) {
    check_op_at_every_dtype("ReluGrad", [&](DType dtype) {
      Tensor dy = random_of(rng, dtype, shape, -3, 3), y = random_of(rng, dtype, shape, -3, 3);
      return OpCase{{dy, y}, {}, {make_tensor(dtype, shape, [&](int64_t i) { return element(y, i) > 0 ? element(dy, i) : 0.0; })}};
    });
    check_op_at_every_dtype("ZerosLike", [&](DType dtype) {
      return OpCase{{random_of(rng, dtype, shape, 1, 4)}, {}, {make_tensor(dtype, shape, [](int64_t) { return 0.0; })}};
    });
    const TensorShape flat{shape.num_elements()};
    check_op_at_every_dtype("ReshapeLike", [&](DType dtype) {
      Tensor y = random_of(rng, dtype, shape, -3, 3);
      return OpCase{{y, make_tensor(DType::f32, flat, [](int64_t) { return 0.0; })},
                    {},
                    {make_tensor(dtype, flat, [&](int64_t i) { return element(y, i); })}};
    });
  }
}

TEST_CASE("Kernels.SumToShape.undoes_broadcasting") {
  runtime::Random rng(41);
  struct Case { TensorShape x, like; };
  for (const Case& c : {Case{{4, 5}, {5}}, Case{{4, 5}, {4, 1}}, Case{{2, 3, 4}, {1, 4}}, Case{{0, 3}, {3}}, Case{{3, 3}, {3, 3}},
                        Case{{2, 2}, {}}}) {
    check_op_at_every_dtype("SumToShape", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.x, -3, 3);
      Tensor like = make_tensor(dtype, c.like, [](int64_t) { return 0.0; });
      const List x_dims = c.x.to_vector(), like_dims = c.like.to_vector();
      std::vector<double> sums(static_cast<size_t>(c.like.num_elements()), 0.0);
      const size_t offset = x_dims.size() - like_dims.size();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const List index = unravel(i, x_dims);
        List target(like_dims.size());
        for (size_t d = 0; d < like_dims.size(); ++d) target[d] = like_dims[d] == 1 ? 0 : index[d + offset];
        sums[static_cast<size_t>(ravel(target, like_dims))] += element(x, i);
      }
      return OpCase{{x, like}, {}, {make_tensor(dtype, c.like, [&](int64_t i) { return sums[static_cast<size_t>(i)]; })}};
    });
  }
}

struct Window {
  int64_t n, h, w, c, kh, kw, s, d;
  bool same, nchw;
};

const Window kWindows[] = {{2, 5, 5, 2, 3, 3, 1, 1, true, false}, {1, 6, 7, 3, 2, 3, 2, 1, false, false},
                           {2, 5, 6, 2, 3, 3, 2, 1, true, true},  {1, 7, 7, 1, 3, 3, 1, 2, false, false},
                           {0, 4, 4, 2, 2, 2, 2, 1, false, false}, {2, 6, 7, 3, 2, 2, 2, 1, true, false},
                           {2, 7, 6, 4, 2, 2, 2, 1, false, false}, {1, 7, 7, 2, 2, 2, 3, 1, false, false},
                           {2, 6, 7, 5, 2, 2, 2, 1, false, false},
                           // Stride 1 (the input gradient as a forward convolution of the turned
                           // filter): uneven SAME padding, VALID, NCHW, a window wider than the
                           // image, a 1x1 window.
                           {2, 6, 5, 3, 2, 3, 1, 1, true, false},  {2, 6, 5, 3, 3, 2, 1, 1, false, true},
                           {1, 4, 4, 2, 5, 5, 1, 1, true, false},  {2, 3, 3, 4, 1, 1, 1, 1, false, false}};

int64_t index_of(const Window& c, int64_t n, int64_t y, int64_t x, int64_t ch, int64_t height, int64_t width, int64_t channels) {
  return c.nchw ? ((n * channels + ch) * height + y) * width + x : ((n * height + y) * width + x) * channels + ch;
}

TensorShape image(const Window& c, int64_t height, int64_t width, int64_t channels) {
  return c.nchw ? TensorShape{c.n, channels, height, width} : TensorShape{c.n, height, width, channels};
}

TEST_CASE("Kernels.Conv2DBackprop.match_scatter_loops") {
  runtime::Random rng(42);
  for (const Window& c : kWindows) {
    CAPTURE(c.h); CAPTURE(c.s); CAPTURE(c.d); CAPTURE(c.same); CAPTURE(c.nchw);
    const int64_t oc = 3;
    const int64_t oh = ops::window_output_dim(c.h, c.kh, c.s, c.d, c.same), ow = ops::window_output_dim(c.w, c.kw, c.s, c.d, c.same);
    const int64_t ph = c.same ? ops::same_padding_before(c.h, oh, c.kh, c.s, c.d) : 0;
    const int64_t pw = c.same ? ops::same_padding_before(c.w, ow, c.kw, c.s, c.d) : 0;
    const graph::AttrMap attrs = {{"strides", List{c.s, c.s}}, {"dilations", List{c.d, c.d}},
                                  {"padding", std::string(c.same ? "SAME" : "VALID")},
                                  {"data_format", std::string(c.nchw ? "NCHW" : "NHWC")}};
    for (const bool input_gradient : {true, false}) {
      check_op_at_every_dtype(input_gradient ? "Conv2DBackpropInput" : "Conv2DBackpropFilter", [&](DType dtype) {
        Tensor x = random_of(rng, dtype, image(c, c.h, c.w, c.c));
        Tensor f = random_of(rng, dtype, {c.kh, c.kw, c.c, oc});
        Tensor dy = random_of(rng, dtype, image(c, oh, ow, oc));
        std::vector<double> dx(static_cast<size_t>(x.num_elements()), 0.0), df(static_cast<size_t>(f.num_elements()), 0.0);
        for (int64_t n = 0; n < c.n; ++n)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx)
              for (int64_t o = 0; o < oc; ++o)
                for (int64_t ky = 0; ky < c.kh; ++ky)
                  for (int64_t kx = 0; kx < c.kw; ++kx) {
                    const int64_t iy = y * c.s - ph + ky * c.d, ix = xx * c.s - pw + kx * c.d;
                    if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                    for (int64_t ic = 0; ic < c.c; ++ic) {
                      const double g = element(dy, index_of(c, n, y, xx, o, oh, ow, oc));
                      const int64_t fi = ((ky * c.kw + kx) * c.c + ic) * oc + o, xi = index_of(c, n, iy, ix, ic, c.h, c.w, c.c);
                      dx[static_cast<size_t>(xi)] += g * element(f, fi);
                      df[static_cast<size_t>(fi)] += g * element(x, xi);
                    }
                  }
        const std::vector<double>& want = input_gradient ? dx : df;
        return OpCase{{x, f, dy},
                      attrs,
                      {make_tensor(dtype, input_gradient ? x.shape() : f.shape(),
                                   [&](int64_t i) { return want[static_cast<size_t>(i)]; })},
                      dtype == DType::f32 ? std::optional(1e-4) : std::nullopt};
      });
    }
  }
}

TEST_CASE("Kernels.PoolGrad.match_scatter_loops") {
  runtime::Random rng(43);
  for (const Window& c : kWindows) {
    if (c.d != 1) continue;
    for (const bool ties : {false, true}) {
      CAPTURE(c.h); CAPTURE(c.s); CAPTURE(c.same); CAPTURE(c.nchw); CAPTURE(ties);
      const int64_t oh = ops::window_output_dim(c.h, c.kh, c.s, 1, c.same), ow = ops::window_output_dim(c.w, c.kw, c.s, 1, c.same);
      const int64_t ph = c.same ? ops::same_padding_before(c.h, oh, c.kh, c.s, 1) : 0;
      const int64_t pw = c.same ? ops::same_padding_before(c.w, ow, c.kw, c.s, 1) : 0;
      const graph::AttrMap attrs = {{"ksize", List{c.kh, c.kw}}, {"strides", List{c.s, c.s}},
                                    {"padding", std::string(c.same ? "SAME" : "VALID")},
                                    {"data_format", std::string(c.nchw ? "NCHW" : "NHWC")}};
      for (const bool average : {false, true}) {
        check_op_at_every_dtype(average ? "AvgPoolGrad" : "MaxPoolGrad", [&](DType dtype) {
          // With ties (three values), a window's gradient goes to its first maximum in row-major order.
          Tensor x = make_tensor(dtype, image(c, c.h, c.w, c.c),
                                 [&](int64_t) { return ties ? std::floor(rng.uniform() * 3) : rng.uniform(); });
          Tensor dy = make_tensor(dtype, image(c, oh, ow, c.c), [&](int64_t) { return rng.uniform() - 0.5; });
          std::vector<double> dx(static_cast<size_t>(x.num_elements()), 0.0);
          for (int64_t n = 0; n < c.n; ++n)
            for (int64_t ch = 0; ch < c.c; ++ch)
              for (int64_t y = 0; y < oh; ++y)
                for (int64_t xx = 0; xx < ow; ++xx) {
                  const double g = element(dy, index_of(c, n, y, xx, ch, oh, ow, c.c));
                  std::vector<int64_t> window;
                  for (int64_t ky = 0; ky < c.kh; ++ky)
                    for (int64_t kx = 0; kx < c.kw; ++kx) {
                      const int64_t iy = y * c.s - ph + ky, ix = xx * c.s - pw + kx;
                      if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w) window.push_back(index_of(c, n, iy, ix, ch, c.h, c.w, c.c));
                    }
                  if (average) {
                    for (int64_t i : window) dx[static_cast<size_t>(i)] += g / static_cast<double>(window.size());
                    continue;
                  }
                  int64_t best = window[0];
                  for (int64_t i : window) if (element(x, i) > element(x, best)) best = i;
                  dx[static_cast<size_t>(best)] += g;
                }
          return OpCase{{x, dy}, attrs, {make_tensor(dtype, x.shape(), [&](int64_t i) { return dx[static_cast<size_t>(i)]; })}};
        });
      }
    }
  }
}

// Mixed precision's activations and their gradients: MaxPoolGrad (with and without the ReLU and the
// channel sums its fusions add) and AvgPoolGrad on an input and dy each f32 or bf16. dx takes dy's
// dtype: the f32 kernel's dx on the same values, rounded to it (exact where dx is dy's values: the
// 2x2 tiles); the channel sums stay f32, equal to the f32 kernel's.
TEST_CASE("Kernels.PoolGrad.bf16_matches_the_f32_kernel_rounded") {
  runtime::Random rng(44);
  for (const Window& c : kWindows) {
    if (c.d != 1) continue;
    const int64_t oh = ops::window_output_dim(c.h, c.kh, c.s, 1, c.same), ow = ops::window_output_dim(c.w, c.kw, c.s, 1, c.same);
    // Values bf16 holds exactly, with ties, and with windows of none above 0 for the ReLU.
    const Tensor x = make_tensor(DType::f32, image(c, c.h, c.w, c.c), [&](int64_t) { return std::floor(rng.uniform() * 8) / 4 - 1; });
    const Tensor dy = as_dtype(random_tensor<float>(rng, image(c, oh, ow, c.c)), DType::bf16);
    for (const DType x_dtype : {DType::f32, DType::bf16}) {
      for (const DType dy_dtype : {DType::f32, DType::bf16}) {
        if (x_dtype == DType::f32 && dy_dtype == DType::f32) continue;
        for (const bool through_relu : {false, true}) {
          CAPTURE(c.h); CAPTURE(c.kh); CAPTURE(c.s); CAPTURE(c.same); CAPTURE(c.nchw);
          const std::string types = std::string(graph::dtype_name(x_dtype)) + ", " + std::string(graph::dtype_name(dy_dtype));
          CAPTURE(types); CAPTURE(through_relu);
          const graph::AttrMap pool = {{"ksize", List{c.kh, c.kw}}, {"strides", List{c.s, c.s}},
                                       {"padding", std::string(c.same ? "SAME" : "VALID")},
                                       {"data_format", std::string(c.nchw ? "NCHW" : "NHWC")}};
          graph::AttrMap max = pool;
          max.set("through_relu", through_relu);
          max.set("channel_sums", true);
          const std::vector<Tensor> inputs = {as_dtype(x, x_dtype), as_dtype(dy, dy_dtype)};
          const auto max_f32 = run_op("MaxPoolGrad", {x, as_dtype(dy, DType::f32)}, max);
          REQUIRE(max_f32.ok());
          check_op("MaxPoolGrad", inputs, max, {as_dtype((*max_f32)[0], dy_dtype), (*max_f32)[1]}, 1e-6);
          if (through_relu) continue;
          const auto avg_f32 = run_op("AvgPoolGrad", {x, as_dtype(dy, DType::f32)}, pool);
          REQUIRE(avg_f32.ok());
          check_op("AvgPoolGrad", inputs, pool, {as_dtype((*avg_f32)[0], dy_dtype)}, 1e-6);
        }
      }
    }
  }
}

}  // namespace
}  // namespace mirra::test
