// MatMul, BiasAdd, Softmax, LogSoftmax, SparseSoftmaxCrossEntropyWithLogits, Conv2D, MaxPool and
// AvgPool against plain loops, over transposes, layouts, paddings, strides, dilations, odd sizes and
// zero-size batches.
#include <cmath>

#include "ops/cpu/dnnl_engine.h"
#include "ops/shape_inference.h"
#include "tests/ops/op_test_util.h"

namespace mirra::test {
namespace {

using graph::AttrValue;

TEST_CASE("Kernels.MatMul.matches_triple_loop") {
  runtime::Random rng(10);
  struct Dims { int64_t m, k, n; };
  for (Dims d : {Dims{0, 4, 3}, Dims{1, 1, 1}, Dims{7, 5, 3}, Dims{33, 17, 9}, Dims{4, 0, 3}, Dims{130, 64, 70},
                 Dims{130, 40, 1024}, Dims{600, 24, 512}}) {  // rows 2 KiB apart, in column and in row chunks
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        CAPTURE(d.m); CAPTURE(d.k); CAPTURE(d.n); CAPTURE(ta); CAPTURE(tb);
        // The batch dim is unknown in the graph only when it is not transposed away.
        check_op_at_every_dtype("MatMul", [&](DType dtype) {
          const TensorShape sa = ta ? TensorShape{d.k, d.m} : TensorShape{d.m, d.k};
          const TensorShape sb = tb ? TensorShape{d.n, d.k} : TensorShape{d.k, d.n};
          Tensor a = random_of(rng, dtype, sa), b = random_of(rng, dtype, sb);
          Tensor want = make_tensor(dtype, {d.m, d.n}, [&](int64_t i) {
            const int64_t r = i / d.n, c = i % d.n;
            double sum = 0;
            for (int64_t k = 0; k < d.k; ++k) {
              sum += element(a, ta ? k * d.m + r : r * d.k + k) * element(b, tb ? c * d.k + k : k * d.n + c);
            }
            return sum;
          });
          return OpCase{{a, b}, {{"transpose_a", ta}, {"transpose_b", tb}}, {want}};
        });
      }
    }
  }
}

TEST_CASE("Kernels.BiasAdd.adds_along_the_channel_dim") {
  runtime::Random rng(11);
  struct Case { TensorShape shape; const char* format; int channel_axis; };
  // Channels last is one vector sweep a row: rows longer than a vector, with a remainder, too.
  for (const Case& c : {Case{{0, 4}, "NHWC", 1}, Case{{5, 3}, "NHWC", 1}, Case{{2, 3, 3, 4}, "NHWC", 3},
                        Case{{4, 70}, "NHWC", 1}, Case{{2, 3, 2, 37}, "NHWC", 3}, Case{{2, 4, 3, 3}, "NCHW", 1},
                        Case{{1, 1, 1, 1}, "NCHW", 1}}) {
    const int64_t channels = c.shape.dim(c.channel_axis);
    check_op_at_every_dtype("BiasAdd", [&](DType dtype) {
      Tensor x = random_of(rng, dtype, c.shape), bias = random_of(rng, dtype, {channels});
      const auto dims = c.shape.to_vector();
      Tensor want = make_tensor(dtype, c.shape, [&](int64_t i) {
        return element(x, i) + element(bias, unravel(i, dims)[static_cast<size_t>(c.channel_axis)]);
      });
      return OpCase{{x, bias}, {{"data_format", std::string(c.format)}}, {want}};
    });
  }
}

TEST_CASE("Kernels.Softmax_and_LogSoftmax.match_reference") {
  runtime::Random rng(12);
  for (const TensorShape& shape : {TensorShape{0, 10}, TensorShape{1, 1}, TensorShape{7, 10}, TensorShape{2, 3, 5}}) {
    const int64_t classes = shape.dim(shape.rank() - 1);
    for (bool log : {true, false}) {
      check_op_at_every_dtype(log ? "LogSoftmax" : "Softmax", [&](DType dtype) {
        // Large logits check the max-shift.
        Tensor x = random_of(rng, dtype, shape, -50, 50);
        auto log_softmax_at = [&](int64_t i) {
          const int64_t row = i / classes;
          double max = -1e300, sum = 0;
          for (int64_t j = 0; j < classes; ++j) max = std::max(max, element(x, row * classes + j));
          for (int64_t j = 0; j < classes; ++j) sum += std::exp(element(x, row * classes + j) - max);
          return element(x, i) - max - std::log(sum);
        };
        return OpCase{{x}, {}, {make_tensor(dtype, shape, [&](int64_t i) {
                        return log ? log_softmax_at(i) : std::exp(log_softmax_at(i));
                      })}};
      });
    }
  }
}

TEST_CASE("Kernels.SparseSoftmaxCrossEntropyWithLogits.loss_and_backprop") {
  runtime::Random rng(13);
  for (int64_t batch : {0, 1, 9}) {
    for (DType label_type : {DType::i32, DType::i64}) {
      const int64_t classes = 7;
      check_op_at_every_dtype("SparseSoftmaxCrossEntropyWithLogits", [&](DType dtype) {
        Tensor logits = random_of(rng, dtype, {batch, classes}, -5, 5);
        Tensor labels = make_tensor(label_type, {batch}, [&](int64_t) { return std::floor(rng.uniform() * classes); });
        auto log_prob = [&](int64_t r, int64_t c) {
          double max = -1e300, sum = 0;
          for (int64_t j = 0; j < classes; ++j) max = std::max(max, element(logits, r * classes + j));
          for (int64_t j = 0; j < classes; ++j) sum += std::exp(element(logits, r * classes + j) - max);
          return element(logits, r * classes + c) - max - std::log(sum);
        };
        Tensor loss = make_tensor(dtype, {batch}, [&](int64_t r) { return -log_prob(r, static_cast<int64_t>(element(labels, r))); });
        Tensor backprop = make_tensor(dtype, {batch, classes}, [&](int64_t i) {
          const int64_t r = i / classes, c = i % classes;
          return std::exp(log_prob(r, c)) - (c == static_cast<int64_t>(element(labels, r)) ? 1.0 : 0.0);
        });
        return OpCase{{logits, labels}, {}, {loss, backprop}};
      });
    }
  }
  auto bad = run_op("SparseSoftmaxCrossEntropyWithLogits",
                    {Tensor::from<float>({2, 3}, {0, 0, 0, 0, 0, 0}), Tensor::from<int32_t>({2}, {1, 3})});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("label 3 of example 1 is outside [0, 3)") != std::string::npos);
}

// NHWC index of (n, h, w, c), or NCHW when `nchw`.
int64_t image_index(bool nchw, const std::vector<int64_t>& nhwc_dims, int64_t n, int64_t h, int64_t w, int64_t c) {
  const int64_t H = nhwc_dims[1], W = nhwc_dims[2], C = nhwc_dims[3];
  return nchw ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

TensorShape layout_shape(bool nchw, int64_t n, int64_t h, int64_t w, int64_t c) {
  return nchw ? TensorShape{n, c, h, w} : TensorShape{n, h, w, c};
}

struct WindowCase {
  int64_t n, h, w, c;
  int64_t kh, kw, sh, sw, dh, dw;
  bool same;
};

const WindowCase kWindowCases[] = {
    {2, 5, 5, 3, 3, 3, 1, 1, 1, 1, true},  {2, 5, 5, 3, 3, 3, 1, 1, 1, 1, false}, {1, 7, 6, 2, 2, 3, 2, 2, 1, 1, true},
    {3, 8, 9, 1, 3, 2, 2, 3, 1, 1, false}, {1, 9, 9, 2, 3, 3, 1, 1, 2, 2, true},  {1, 9, 9, 2, 3, 3, 2, 1, 2, 2, false},
    {0, 5, 5, 3, 3, 3, 1, 1, 1, 1, true},  {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false}, {1, 2, 2, 1, 3, 3, 1, 1, 1, 1, false},
    // 2x2 windows at stride 2 tiling the input (MaxPool's loop of its own in NHWC): an odd height and
    // width left over and channels past a vector's width, and an even tiling.
    {2, 7, 9, 19, 2, 2, 2, 2, 1, 1, false}, {3, 8, 6, 16, 2, 2, 2, 2, 1, 1, false},
};

// Every window case, and each VALID one again with EXPLICIT padding (1 before and 2 after the height,
// none before and 1 after the width), against a direct loop, at every dtype and in both layouts.
TEST_CASE("Kernels.Conv2D.matches_direct_convolution") {
  runtime::Random rng(14);
  for (const WindowCase& c : kWindowCases) {
    for (bool nchw : {false, true}) {
      for (bool explicit_padding : {false, true}) {
        // (EXPLICIT padding must be narrower than the window: the cases of windows of 3 x 2 and more.)
        if (explicit_padding && (c.same || (c.kh - 1) * c.dh + 1 < 3 || (c.kw - 1) * c.dw + 1 < 2)) continue;
        const int64_t out_channels = 4;
        CAPTURE(nchw); CAPTURE(c.h); CAPTURE(c.kh); CAPTURE(c.sh); CAPTURE(c.dh); CAPTURE(c.same); CAPTURE(explicit_padding);
        const int64_t top = explicit_padding ? 1 : 0, bottom = explicit_padding ? 2 : 0, right = explicit_padding ? 1 : 0;
        check_op_at_every_dtype("Conv2D", [&](DType dtype) {
          Tensor input = random_of(rng, dtype, layout_shape(nchw, c.n, c.h, c.w, c.c));
          Tensor filter = random_of(rng, dtype, {c.kh, c.kw, c.c, out_channels});
          const int64_t oh = ops::window_output_dim(c.h + top + bottom, c.kh, c.sh, c.dh, c.same);
          const int64_t ow = ops::window_output_dim(c.w + right, c.kw, c.sw, c.dw, c.same);
          const int64_t ph = c.same ? ops::same_padding_before(c.h, oh, c.kh, c.sh, c.dh) : top;
          const int64_t pw = c.same ? ops::same_padding_before(c.w, ow, c.kw, c.sw, c.dw) : 0;
          const std::vector<int64_t> in_dims = {c.n, c.h, c.w, c.c};
          Tensor want = make_tensor(dtype, layout_shape(nchw, c.n, oh, ow, out_channels), [&](int64_t i) {
            // i is in the output layout; recover (n, y, x, o).
            const auto idx = unravel(i, layout_shape(nchw, c.n, oh, ow, out_channels).to_vector());
            const int64_t n = idx[0], y = nchw ? idx[2] : idx[1], x = nchw ? idx[3] : idx[2], o = nchw ? idx[1] : idx[3];
            double sum = 0;
            for (int64_t ky = 0; ky < c.kh; ++ky) {
              for (int64_t kx = 0; kx < c.kw; ++kx) {
                const int64_t iy = y * c.sh - ph + ky * c.dh, ix = x * c.sw - pw + kx * c.dw;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                for (int64_t ic = 0; ic < c.c; ++ic) {
                  sum += element(input, image_index(nchw, in_dims, n, iy, ix, ic)) *
                         element(filter, ((ky * c.kw + kx) * c.c + ic) * out_channels + o);
                }
              }
            }
            return sum;
          });
          graph::AttrMap attrs{{"strides", std::vector<int64_t>{c.sh, c.sw}},
                               {"dilations", std::vector<int64_t>{c.dh, c.dw}},
                               {"padding", std::string(c.same ? "SAME" : explicit_padding ? "EXPLICIT" : "VALID")},
                               {"data_format", std::string(nchw ? "NCHW" : "NHWC")}};
          if (explicit_padding) {
            attrs.set("explicit_paddings", nchw ? std::vector<int64_t>{0, 0, 0, 0, top, bottom, 0, right}
                                                : std::vector<int64_t>{0, 0, top, bottom, 0, right, 0, 0});
          }
          return OpCase{{input, filter}, attrs, {want}, dtype == DType::f32 ? std::optional(1e-4) : std::nullopt};
        });
      }
    }
  }
}

// EXPLICIT padding's amounts are checked when the node is added: TensorFlow's rules (8 of them, none on
// the batch or channel dims, none when padding is not EXPLICIT), none negative, and each narrower than
// the window (mirra's own rule: oneDNN takes no window of padding alone).
TEST_CASE("Kernels.Conv2D.explicit_paddings_are_checked_when_the_node_is_added") {
  const std::pair<std::string, std::vector<int64_t>> refused[] = {
      {"EXPLICIT", {0, 0, 1, 1, 1, 1}},       {"EXPLICIT", {1, 0, 1, 1, 1, 1, 0, 0}}, {"EXPLICIT", {0, 0, 1, 1, 1, 1, 0, 1}},
      {"EXPLICIT", {0, 0, -1, 1, 1, 1, 0, 0}}, {"SAME", {0, 0, 1, 1, 1, 1, 0, 0}},     {"FULL", {}},
      {"EXPLICIT", {0, 0, 3, 0, 0, 0, 0, 0}}};  // as wide as the 3x3 window
  for (const auto& refusal : refused) {
    const std::string& padding = refusal.first;
    const std::vector<int64_t>& amounts = refusal.second;
    CAPTURE(padding);
    CAPTURE(amounts.size());
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    auto x = ops::placeholder(b, "x", DType::f32, {-1, 8, 8, 2});
    auto w = ops::variable(b, "w", {3, 3, 2, 4});
    (void)ops::conv2d(b, x, w, {.padding = padding, .explicit_paddings = amounts});
    CHECK_FALSE(b.status().ok());
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 8, 8, 2});
  auto w = ops::variable(b, "w", {3, 3, 2, 4});
  auto y = ops::conv2d(b, x, w, {.strides = {2, 2}, .padding = "EXPLICIT", .explicit_paddings = {0, 0, 1, 2, 0, 1, 0, 0}});
  REQUIRE(b.status().ok());
  CHECK(g.type(y).to_string() == "f32[?,5,4,4]");  // (8 + 3 - 3) / 2 + 1 and (8 + 1 - 3) / 2 + 1
}

// A node keeps the oneDNN primitives of the problems it saw last (cpu::kPrimitivesPerNode): fed more
// shapes than that, and earlier ones again after they were dropped, one Conv2D node computes each
// as the f64 (im2col) kernel does, forward and both gradients.
TEST_CASE("Kernels.Conv2D.one_node_computes_every_shape_it_is_fed") {
  runtime::Random rng(17);
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {-1, -1, -1, 3});
  auto w = ops::placeholder(b, "w", DType::f32, {3, 3, 3, 4});
  auto y = ops::conv2d(b, x, w, {.strides = {1, 1}});
  auto dy = ops::placeholder(b, "dy", DType::f32, {-1, -1, -1, 4});
  const graph::AttrMap attrs = {{"padding", std::string("SAME")}};
  auto dx = b.add_value({.op = "Conv2DBackpropInput", .inputs = {x, w, dy}, .attrs = attrs});
  auto dw = b.add_value({.op = "Conv2DBackpropFilter", .inputs = {x, w, dy}, .attrs = attrs});
  REQUIRE(b.status().ok());
  runtime::Session session(g, ops::kernels());
  const Tensor filter = random_tensor<float>(rng, {3, 3, 3, 4});
  std::vector<TensorShape> shapes;
  for (int64_t i = 0; i < 20; ++i) shapes.push_back({1 + i % 3, 4 + i, 5 + i % 4, 3});
  for (int64_t i = 0; i < 6; ++i) shapes.push_back(shapes[static_cast<size_t>(i)]);  // dropped by now
  for (const TensorShape& shape : shapes) {
    CAPTURE(shape.to_vector());
    const Tensor input = random_tensor<float>(rng, shape);
    const Tensor gradient = random_tensor<float>(rng, {shape.dim(0), shape.dim(1), shape.dim(2), 4});
    auto got = session.run({{"x", input}, {"w", filter}, {"dy", gradient}}, {y, dx, dw});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    const std::vector<Tensor> operands = {as_dtype(input, DType::f64), as_dtype(filter, DType::f64),
                                          as_dtype(gradient, DType::f64)};
    auto forward = run_op("Conv2D", {operands[0], operands[1]}, attrs);
    auto input_gradient = run_op("Conv2DBackpropInput", operands, attrs);
    auto filter_gradient = run_op("Conv2DBackpropFilter", operands, attrs);
    REQUIRE((forward.ok() && input_gradient.ok() && filter_gradient.ok()));
    const Tensor* wanted[] = {&(*forward)[0], &(*input_gradient)[0], &(*filter_gradient)[0]};
    for (size_t k = 0; k < 3; ++k) {
      CAPTURE(k);
      REQUIRE((*got)[k].shape() == wanted[k]->shape());
      double worst = 0;
      for (int64_t i = 0; i < wanted[k]->num_elements(); ++i) {
        const double want = element(*wanted[k], i);
        worst = std::max(worst, std::abs(element((*got)[k], i) - want) / std::max(1.0, std::abs(want)));
      }
      CHECK(worst < 1e-4);
    }
  }
}

TEST_CASE("Kernels.MaxPool_and_AvgPool.match_window_loops") {
  runtime::Random rng(15);
  for (const WindowCase& c : kWindowCases) {
    if (c.dh != 1 || c.dw != 1) continue;  // pooling has no dilation
    for (bool nchw : {false, true}) {
      CAPTURE(nchw); CAPTURE(c.h); CAPTURE(c.kh); CAPTURE(c.sh); CAPTURE(c.same);
      const int64_t oh = ops::window_output_dim(c.h, c.kh, c.sh, 1, c.same);
      const int64_t ow = ops::window_output_dim(c.w, c.kw, c.sw, 1, c.same);
      const int64_t ph = c.same ? ops::same_padding_before(c.h, oh, c.kh, c.sh, 1) : 0;
      const int64_t pw = c.same ? ops::same_padding_before(c.w, ow, c.kw, c.sw, 1) : 0;
      const std::vector<int64_t> in_dims = {c.n, c.h, c.w, c.c};
      const TensorShape out_shape = layout_shape(nchw, c.n, oh, ow, c.c);
      auto pooled = [&](const Tensor& input, bool average) {
        return make_tensor(input.dtype(), out_shape, [&](int64_t i) {
          const auto idx = unravel(i, out_shape.to_vector());
          const int64_t n = idx[0], y = nchw ? idx[2] : idx[1], x = nchw ? idx[3] : idx[2], ch = nchw ? idx[1] : idx[3];
          double max = -1e300, sum = 0;
          int count = 0;
          for (int64_t ky = 0; ky < c.kh; ++ky) {
            for (int64_t kx = 0; kx < c.kw; ++kx) {
              const int64_t iy = y * c.sh - ph + ky, ix = x * c.sw - pw + kx;
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              const double v = element(input, image_index(nchw, in_dims, n, iy, ix, ch));
              max = std::max(max, v);
              sum += v;
              ++count;
            }
          }
          return average ? sum / count : max;
        });
      };
      const graph::AttrMap attrs = {{"ksize", std::vector<int64_t>{c.kh, c.kw}},
                                    {"strides", std::vector<int64_t>{c.sh, c.sw}},
                                    {"padding", std::string(c.same ? "SAME" : "VALID")},
                                    {"data_format", std::string(nchw ? "NCHW" : "NHWC")}};
      for (bool average : {false, true}) {
        check_op_at_every_dtype(average ? "AvgPool" : "MaxPool", [&](DType dtype) {
          Tensor input = random_of(rng, dtype, layout_shape(nchw, c.n, c.h, c.w, c.c));
          return OpCase{{input}, attrs, {pooled(input, average)}};
        });
      }
    }
  }
}

// bf16 (mixed precision's activations): the maximum exactly, the average within a bf16 rounding of
// the f32 kernel's.
TEST_CASE("Kernels.MaxPool_and_AvgPool.on_bf16") {
  runtime::Random rng(16);
  for (const WindowCase& c : kWindowCases) {
    if (c.dh != 1 || c.dw != 1) continue;
    for (bool nchw : {false, true}) {
      CAPTURE(nchw); CAPTURE(c.h); CAPTURE(c.kh); CAPTURE(c.sh); CAPTURE(c.same);
      const Tensor input = as_dtype(random_tensor<float>(rng, layout_shape(nchw, c.n, c.h, c.w, c.c)), DType::bf16);
      const graph::AttrMap attrs = {{"ksize", std::vector<int64_t>{c.kh, c.kw}},
                                    {"strides", std::vector<int64_t>{c.sh, c.sw}},
                                    {"padding", std::string(c.same ? "SAME" : "VALID")},
                                    {"data_format", std::string(nchw ? "NCHW" : "NHWC")}};
      for (const char* op : {"MaxPool", "AvgPool"}) {
        CAPTURE(op);
        const auto in_f32 = run_op(op, {as_dtype(input, DType::f32)}, attrs);
        REQUIRE(in_f32.ok());
        check_op(op, {input}, attrs, {as_dtype((*in_f32)[0], DType::bf16)}, std::string(op) == "MaxPool" ? 0.0 : 1.0 / 128);
      }
    }
  }
}

TEST_CASE("Kernels.Conv2D.wrong_filter_fails_when_the_node_is_added") {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  auto x = ops::placeholder(b, "x", DType::f32, {-1, 28, 28, 1});
  auto w = ops::variable(b, "w", {5, 5, 3, 32});
  (void)ops::conv2d(b, x, w);
  REQUIRE_FALSE(b.status().ok());
  CHECK(b.status().message() ==
        "node 'Conv2D' (Conv2D): filter's input channels differ from the input's; inputs (f32[?,28,28,1], f32[5,5,3,32])");
}

}  // namespace
}  // namespace mirra::test

namespace mirra::test {
namespace {

// oneDNN fixes how a primitive splits its work among threads when it builds it, from the calling
// thread's OpenMP team: a filter gradient built right after a one-thread call (a small product) would
// sum its batch in another order than one built after a two-thread call, and a run's bits would
// depend on which thread built it. Primitives are built with the threads they run with.
TEST_CASE("Kernels.Conv2DBackpropFilter.bits_do_not_depend_on_the_building_thread's_last_call") {
  runtime::Random rng(31);
  const Tensor input = random_of(rng, DType::f32, {64, 14, 14, 32});
  const Tensor filter = random_of(rng, DType::f32, {3, 3, 32, 32});
  const Tensor dy = random_of(rng, DType::f32, {64, 14, 14, 32});
  const auto filter_gradient = [&](int last_call_threads) {
    graph::Graph g;
    graph::Builder b(g, ops::registry());
    const graph::ValueRef x = ops::placeholder(b, "x", DType::f32, {64, 14, 14, 32});
    const graph::ValueRef w = ops::placeholder(b, "w", DType::f32, {3, 3, 32, 32});
    const graph::ValueRef d = ops::placeholder(b, "dy", DType::f32, {64, 14, 14, 32});
    const graph::ValueRef dw = b.add_value({.op = "Conv2DBackpropFilter",
                                            .inputs = {x, w, d},
                                            .attrs = {{"strides", std::vector<int64_t>{1, 1}}, {"padding", std::string("SAME")}}});
    REQUIRE(b.status().ok());
    // One node at a time on this thread, which last ran oneDNN with `last_call_threads` threads.
    runtime::Session session(g, ops::kernels(), {.threads = 2, .deterministic = true});
    ops::cpu::with_dnnl_threads(last_call_threads, [] {});
    auto out = session.run({{"x", input}, {"w", filter}, {"dy", dy}}, {dw});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    return (*out)[0].to_vector<float>();
  };
  CHECK(filter_gradient(1) == filter_gradient(2));
}

}  // namespace
}  // namespace mirra::test
