// MaxPool and AvgPool: schemas, builders and CPU kernels (oneDNN pooling; the max over NHWC 2x2 windows
// at stride 2, a CNN's, and the pooling gradients by loops of their own).
#include "ops/pool_ops.h"

#include <cstring>

#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/window_geometry.h"
#include "ops/op_families.h"
#include "ops/window_attrs.h"
#include "runtime/vector_clones.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// Whether the windows are NHWC 2x2 at stride 2 without padding: they tile the input (but an odd last
// row or column), which the loops below take one row of windows at a time.
bool tiles_2x2(const cpu::WindowGeometry& g, bool nchw, const std::vector<int64_t>& ksize,
               const std::vector<int64_t>& strides) {
  return !nchw && ksize == std::vector<int64_t>{2, 2} && strides == std::vector<int64_t>{2, 2} && g.pad_before[0] == 0 &&
         g.pad_before[1] == 0 && g.pad_after[0] == 0 && g.pad_after[1] == 0;
}

// The maximum of each window of one output row, from the top and bottom input rows under it. The
// channel loop is plain selections, the first maximum in row-major window order as MaxPoolGrad picks
// it, which the compiler vectorises; for f32 it is compiled for AVX-512 and AVX2 too, picked at load
// time: in the CNN's training step it takes 0.4 of the time oneDNN 2.6's pooling took (see
// docs/performance.md).
MIRRA_VECTOR_CLONES void max_pool_2x2_row_f32(const float* __restrict top, const float* __restrict bottom,
                                              float* __restrict y, int64_t windows, int64_t C) {
  for (int64_t w = 0; w < windows; ++w) {
    const float* a0 = top + 2 * w * C;
    const float* a1 = a0 + C;
    const float* a2 = bottom + 2 * w * C;
    const float* a3 = a2 + C;
    float* out = y + w * C;
    for (int64_t c = 0; c < C; ++c) {
      const float best_of_1 = a1[c] > a0[c] ? a1[c] : a0[c];
      const float best_of_2 = a2[c] > best_of_1 ? a2[c] : best_of_1;
      out[c] = a3[c] > best_of_2 ? a3[c] : best_of_2;
    }
  }
}

void max_pool_2x2(const float* x, float* y, const cpu::WindowGeometry& g) {
  const int64_t H = g.height, W = g.width, C = g.channels, OH = g.out_height, OW = g.out_width;
  cpu::parallel_for(g.batch, 1, [=](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t oy = 0; oy < OH; ++oy) {
        const int64_t top = (n * H + 2 * oy) * W * C;
        max_pool_2x2_row_f32(x + top, x + top + W * C, y + (n * OH + oy) * OW * C, OW, C);
      }
    }
  });
}

template <dnnl::algorithm kAlgorithm>
Status pool_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  const auto& strides = ctx.attr<std::vector<int64_t>>("strides");
  const auto g = cpu::WindowGeometry::make(input, nchw, ksize[0], ksize[1], strides, {1, 1},
                                           ctx.attr<std::string>("padding") == "SAME");
  Tensor& output = ctx.allocate_output(0, DType::f32, g.output_shape(nchw, g.channels));
  if (output.num_elements() == 0) return Status();
  if (kAlgorithm == dnnl::algorithm::pooling_max && tiles_2x2(g, nchw, ksize, strides)) {
    max_pool_2x2(input.data<float>(), output.mutable_data<float>(), g);
    return Status();
  }
  using dnnl::memory;
  const memory::desc src_md({g.batch, g.channels, g.height, g.width}, memory::data_type::f32, g.layout);
  const memory::desc dst_md({g.batch, g.channels, g.out_height, g.out_width}, memory::data_type::f32, g.layout);
  const std::string key =
      cpu::dnnl_key("pool", {static_cast<int64_t>(kAlgorithm), static_cast<int64_t>(g.layout), g.batch, g.channels,
                             g.height, g.width, ksize[0], ksize[1], g.strides[0], g.strides[1], g.pad_before[0],
                             g.pad_before[1], g.pad_after[0], g.pad_after[1]});
  MIRRA_ASSIGN_OR_RETURN(const cpu::DnnlPrimitive* primitive, cpu::cached_dnnl_primitive(key, [&] {
    const dnnl::pooling_forward::primitive_desc pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, kAlgorithm, src_md, dst_md, g.strides,
                                    {ksize[0], ksize[1]}, g.pad_before, g.pad_after),
        cpu::dnnl_user_scratchpad(), cpu::dnnl_engine());
    return cpu::DnnlPrimitive{dnnl::pooling_forward(pd), pd.scratchpad_desc(), {}};
  }));
  auto& engine = cpu::dnnl_engine();
  return cpu::dnnl_execute(*primitive, {{DNNL_ARG_SRC, memory(src_md, engine, const_cast<void*>(input.raw_data()))},
                                        {DNNL_ARG_DST, memory(dst_md, engine, output.mutable_raw_data())}}, ctx.device());
}

Expected<std::vector<TensorType>> infer_pool(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32}));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "ksize"));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
  MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  MIRRA_RETURN_IF_ERROR(check_window_extent(ctx, ksize[0], ksize[1], {1, 1}));
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const int64_t channels = ctx.input(0).shape.dim(nchw ? 1 : 3);
  return std::vector<TensorType>{{DType::f32, window_output_shape(ctx, ksize[0], ksize[1], {1, 1}, channels)}};
}

// MaxPoolGrad for NHWC 2x2 windows at stride 2 without padding (the common CNN pooling): the windows
// tile the input, so each input element is written once, with its window's gradient where it is the
// first maximum and 0 elsewhere. kThroughRelu: the input is a ReLU's output and the gradient passes
// that ReLU too, so a window whose maximum is not positive passes nothing.
//
// One output row of windows at a time: the top and bottom input rows under it, their gradient rows,
// and dy's row; `sums` (one per channel) gains what each window passes on. The channel loop is
// written as plain selections, which the compiler turns into vector compares and blends, and for f32
// it is compiled for AVX-512 and AVX2 as well, picked at load time: 16 or 8 channels at a time instead
// of a branch per element (it was 2.7x slower with branches).
template <class T, bool kThroughRelu>
[[gnu::always_inline]] inline void max_pool_grad_2x2_row(const T* __restrict top, const T* __restrict bottom,
                                                         const T* __restrict dy, T* __restrict dx_top,
                                                         T* __restrict dx_bottom, T* __restrict sums,
                                                         int64_t windows, int64_t C) {
  for (int64_t w = 0; w < windows; ++w) {
    const T* a0 = top + 2 * w * C;
    const T* a1 = a0 + C;
    const T* a2 = bottom + 2 * w * C;
    const T* a3 = a2 + C;
    T* o0 = dx_top + 2 * w * C;
    T* o1 = o0 + C;
    T* o2 = dx_bottom + 2 * w * C;
    T* o3 = o2 + C;
    const T* grad = dy + w * C;
    for (int64_t c = 0; c < C; ++c) {
      // The first maximum in row-major window order, as the general loop picks it: element i wins
      // when it is larger than every element before it and no later one is larger still.
      const T best_of_1 = a1[c] > a0[c] ? a1[c] : a0[c];
      const T best_of_2 = a2[c] > best_of_1 ? a2[c] : best_of_1;
      const T best = a3[c] > best_of_2 ? a3[c] : best_of_2;
      T left = grad[c];  // what is still to place
      if constexpr (kThroughRelu) left = best > T(0) ? left : T(0);
      sums[c] += left;
      o3[c] = a3[c] > best_of_2 ? left : T(0);
      left = a3[c] > best_of_2 ? T(0) : left;
      o2[c] = a2[c] > best_of_1 ? left : T(0);
      left = a2[c] > best_of_1 ? T(0) : left;
      o1[c] = a1[c] > a0[c] ? left : T(0);
      o0[c] = a1[c] > a0[c] ? T(0) : left;
    }
  }
}

MIRRA_VECTOR_CLONES void max_pool_grad_2x2_row_f32(const float* top, const float* bottom, const float* dy, float* dx_top,
                                                   float* dx_bottom, float* sums, int64_t windows, int64_t C) {
  max_pool_grad_2x2_row<float, false>(top, bottom, dy, dx_top, dx_bottom, sums, windows, C);
}
MIRRA_VECTOR_CLONES void max_pool_grad_2x2_row_f32_through_relu(const float* top, const float* bottom, const float* dy,
                                                                float* dx_top, float* dx_bottom, float* sums,
                                                                int64_t windows, int64_t C) {
  max_pool_grad_2x2_row<float, true>(top, bottom, dy, dx_top, dx_bottom, sums, windows, C);
}

// `sums`: [batch, channels], what each image's windows pass on per channel.
template <class T, bool kThroughRelu>
void max_pool_grad_2x2(const T* x, const T* dy, T* dx, T* sums, const cpu::WindowGeometry& g) {
  const int64_t H = g.height, W = g.width, C = g.channels, OH = g.out_height, OW = g.out_width;
  cpu::parallel_for(g.batch, 1, [=](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      T* image = dx + n * H * W * C;
      // Rows and columns no window covers (an odd height or width) get no gradient.
      if (H > 2 * OH) std::fill_n(image + 2 * OH * W * C, (H - 2 * OH) * W * C, T(0));
      for (int64_t oy = 0; oy < OH; ++oy) {
        if (W > 2 * OW) {
          for (int64_t row = 2 * oy; row < 2 * oy + 2; ++row) std::fill_n(image + (row * W + 2 * OW) * C, (W - 2 * OW) * C, T(0));
        }
        const int64_t top = (n * H + 2 * oy) * W * C, bottom = top + W * C;
        const T* grad = dy + (n * OH + oy) * OW * C;
        if constexpr (std::is_same_v<T, float>) {
          (kThroughRelu ? max_pool_grad_2x2_row_f32_through_relu : max_pool_grad_2x2_row_f32)(
              x + top, x + bottom, grad, dx + top, dx + bottom, sums + n * C, OW, C);
        } else {
          max_pool_grad_2x2_row<T, kThroughRelu>(x + top, x + bottom, grad, dx + top, dx + bottom, sums + n * C, OW, C);
        }
      }
    }
  });
}

// Gradients of pooling, by direct loops (NHWC: an image per task; NCHW: a (batch, channel) plane): the
// max's gradient goes to the first largest element of each window (with through_relu, only where that
// element is positive), and with channel_sums output 1 is what passed, per channel; the average's is
// shared by the window's real (unpadded) elements.
template <bool kMax>
Status pool_grad_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  const auto& strides = ctx.attr<std::vector<int64_t>>("strides");
  const auto g = cpu::WindowGeometry::make(input, nchw, ksize[0], ksize[1], strides, {1, 1},
                                           ctx.attr<std::string>("padding") == "SAME");
  if (!(dy.shape() == g.output_shape(nchw, g.channels))) {
    return graph::invalid_argument("dy " + dy.type_string() + " does not match the pooled shape of " + input.type_string());
  }
  Tensor& dx = ctx.allocate_output(0, input.dtype(), input.shape());
  // What each image's windows pass on, per channel: [batch, channels], summed over the batch in
  // order into output 1 when channel_sums asks for it (the bias gradient, for any thread count).
  const bool channel_sums = kMax && ctx.attr<bool>("channel_sums");
  Tensor image_sums = Tensor::empty(ctx.device().allocator(), input.dtype(),
                                    kMax ? TensorShape{g.batch, g.channels} : TensorShape{0});
  if (image_sums.byte_size() > 0) std::memset(image_sums.mutable_raw_data(), 0, image_sums.byte_size());
  const auto finish = [&]<class T>(cpu::Type<T>) {
    if (!channel_sums) return Status();
    Tensor& sums = ctx.allocate_output(1, input.dtype(), TensorShape{g.channels});
    T* total = sums.mutable_data<T>();
    const T* per_image = image_sums.data<T>();
    std::fill_n(total, g.channels, T(0));
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t c = 0; c < g.channels; ++c) total[c] += per_image[n * g.channels + c];
    }
    return Status();
  };
  const bool through_relu = kMax && ctx.attr<bool>("through_relu");
  if (kMax && tiles_2x2(g, nchw, ksize, strides)) {
    return cpu::visit_dtype<float, double>(input.dtype(), [&]<class T>(cpu::Type<T>) {
      T* sums = image_sums.mutable_data<T>();
      if (through_relu) {
        max_pool_grad_2x2<T, true>(input.data<T>(), dy.data<T>(), dx.mutable_data<T>(), sums, g);
      } else {
        max_pool_grad_2x2<T, false>(input.data<T>(), dy.data<T>(), dx.mutable_data<T>(), sums, g);
      }
      return finish(cpu::Type<T>{});
    });
  }
  const int64_t H = g.height, W = g.width, C = g.channels, OH = g.out_height, OW = g.out_width;
  auto at = [nchw, C](int64_t n, int64_t h, int64_t w, int64_t c, int64_t height, int64_t width) {
    return nchw ? ((n * C + c) * height + h) * width + w : ((n * height + h) * width + w) * C + c;
  };
  // The input rows [y0, y1) and columns [x0, x1) under output (oy, ox), padding excluded.
  struct Window {
    int64_t y0, y1, x0, x1;
  };
  auto window = [&](int64_t oy, int64_t ox) {
    const int64_t top = oy * strides[0] - g.pad_before[0], left = ox * strides[1] - g.pad_before[1];
    return Window{std::max<int64_t>(top, 0), std::min<int64_t>(top + ksize[0], H), std::max<int64_t>(left, 0),
                  std::min<int64_t>(left + ksize[1], W)};
  };
  return cpu::visit_dtype<float, double>(input.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* x = input.data<T>();
    const T* d = dy.data<T>();
    T* out = dx.mutable_data<T>();
    T* sums = image_sums.mutable_data<T>();
    if (!nchw) {
      // NHWC: channels are contiguous, so each window is visited once for all channels at a time.
      // Windows may overlap, so one thread owns each image (and zeroes it first, while it is hot).
      cpu::parallel_for(g.batch, 1, [&](int64_t begin, int64_t end) {
        std::vector<T> best_value(static_cast<size_t>(C));
        std::vector<int64_t> best_at(static_cast<size_t>(C));
        for (int64_t n = begin; n < end; ++n) {
          std::fill_n(out + n * H * W * C, H * W * C, T(0));
          for (int64_t oy = 0; oy < OH; ++oy) {
            for (int64_t ox = 0; ox < OW; ++ox) {
              const auto [y0, y1, x0, x1] = window(oy, ox);
              if (y0 >= y1 || x0 >= x1) continue;
              const T* grad = d + at(n, oy, ox, 0, OH, OW);
              if constexpr (kMax) {
                // The first maximum in row-major window order, as in the NCHW loop below.
                const int64_t first = at(n, y0, x0, 0, H, W);
                for (int64_t c = 0; c < C; ++c) {
                  best_value[static_cast<size_t>(c)] = x[first + c];
                  best_at[static_cast<size_t>(c)] = first + c;
                }
                for (int64_t iy = y0; iy < y1; ++iy) {
                  for (int64_t ix = x0; ix < x1; ++ix) {
                    const int64_t pixel = at(n, iy, ix, 0, H, W);
                    for (int64_t c = 0; c < C; ++c) {
                      if (x[pixel + c] > best_value[static_cast<size_t>(c)]) {
                        best_value[static_cast<size_t>(c)] = x[pixel + c];
                        best_at[static_cast<size_t>(c)] = pixel + c;
                      }
                    }
                  }
                }
                for (int64_t c = 0; c < C; ++c) {
                  if (!through_relu || best_value[static_cast<size_t>(c)] > T(0)) {
                    out[best_at[static_cast<size_t>(c)]] += grad[c];
                    sums[n * C + c] += grad[c];
                  }
                }
              } else {
                const T count = static_cast<T>((y1 - y0) * (x1 - x0));
                for (int64_t iy = y0; iy < y1; ++iy) {
                  for (int64_t ix = x0; ix < x1; ++ix) {
                    T* pixel = out + at(n, iy, ix, 0, H, W);
                    for (int64_t c = 0; c < C; ++c) pixel[c] += grad[c] / count;
                  }
                }
              }
            }
          }
        }
      });
      return finish(cpu::Type<T>{});
    }
    cpu::parallel_for(g.batch * C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / C, c = plane % C;
        std::fill_n(out + plane * H * W, H * W, T(0));  // NCHW: plane (n, c) is contiguous
        for (int64_t oy = 0; oy < OH; ++oy) {
          for (int64_t ox = 0; ox < OW; ++ox) {
            const auto [y0, y1, x0, x1] = window(oy, ox);
            if (y0 >= y1 || x0 >= x1) continue;
            const T grad = d[at(n, oy, ox, c, OH, OW)];
            if constexpr (kMax) {
              int64_t best = at(n, y0, x0, c, H, W);
              for (int64_t iy = y0; iy < y1; ++iy) {
                for (int64_t ix = x0; ix < x1; ++ix) {
                  if (x[at(n, iy, ix, c, H, W)] > x[best]) best = at(n, iy, ix, c, H, W);
                }
              }
              if (!through_relu || x[best] > T(0)) {
                out[best] += grad;
                sums[plane] += grad;  // plane n * C + c
              }
            } else {
              const T share = grad / static_cast<T>((y1 - y0) * (x1 - x0));
              for (int64_t iy = y0; iy < y1; ++iy) {
                for (int64_t ix = x0; ix < x1; ++ix) out[at(n, iy, ix, c, H, W)] += share;
              }
            }
          }
        }
      }
    });
    return finish(cpu::Type<T>{});
  });
}

graph::AttrMap pool_attrs(const graph::Node& node) { return copy_attrs(node, {"ksize", "strides", "padding", "data_format"}); }

std::vector<graph::ValueRef> max_pool_grad(graph::GradientContext& g) {
  return {g.builder.add_value({.op = "MaxPoolGrad", .inputs = {g.input(0), g.grad(0)}, .attrs = pool_attrs(g.node)})};
}
std::vector<graph::ValueRef> avg_pool_grad(graph::GradientContext& g) {
  return {g.builder.add_value({.op = "AvgPoolGrad", .inputs = {g.input(0), g.grad(0)}, .attrs = pool_attrs(g.node)})};
}

const std::vector<graph::AttrSpec> kPoolAttrs = {{"ksize", AttrType::int_list, std::vector<int64_t>{2, 2}},
                                                 {"strides", AttrType::int_list, std::vector<int64_t>{2, 2}},
                                                 {"padding", AttrType::string, std::string("VALID")},
                                                 {"data_format", AttrType::string, std::string("NHWC")}};

// A pooling gradient on (input, dy); with `channel_sums`, MaxPoolGrad's attribute of that name may ask
// for output 1 (a vector of the channels).
void register_pool_grad(const char* name, runtime::KernelFn kernel, std::vector<graph::AttrSpec> attrs, bool channel_sums,
                        const char* summary, graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"input", "dy"},
                              .attrs = std::move(attrs),
                              .infer = [channel_sums](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
                                MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
                                MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
                                MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 4));
                                MIRRA_RETURN_IF_ERROR(check_pair(ctx, "ksize"));
                                MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
                                MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
                                const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
                                MIRRA_RETURN_IF_ERROR(check_window_extent(ctx, ksize[0], ksize[1], {1, 1}));
                                std::vector<TensorType> outputs = {ctx.input(0)};
                                if (channel_sums && ctx.attr<bool>("channel_sums")) {
                                  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
                                  outputs.push_back({ctx.input(0).dtype, Shape{ctx.input(0).shape.dim(nchw ? 1 : 3)}});
                                }
                                return outputs;
                              },
                              .summary = summary,
                              .no_gradient = "second derivatives of pooling are not supported"});
  kernels.add(name, graph::DeviceKind::cpu, {kernel, /*expensive=*/true});
}

void register_pool(const char* name, runtime::KernelFn kernel, graph::GradientFn gradient, graph::OpRegistry& schemas,
                   runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"input"},
                              .attrs = kPoolAttrs,
                              .infer = infer_pool,
                              .summary = "2-D pooling over ksize windows.",
                              .gradient = std::move(gradient)});
  kernels.add(name, graph::DeviceKind::cpu, {kernel, /*expensive=*/true});
}

graph::ValueRef pool(graph::Builder& b, const char* op, graph::ValueRef input, const PoolOptions& options) {
  return b.add_value({.op = op,
                      .inputs = {input},
                      .attrs = {{"ksize", options.ksize},
                                {"strides", options.strides},
                                {"padding", options.padding},
                                {"data_format", options.data_format}}});
}

}  // namespace

void register_pool_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_pool("MaxPool", pool_kernel<dnnl::algorithm::pooling_max>, max_pool_grad, schemas, kernels);
  register_pool("AvgPool", pool_kernel<dnnl::algorithm::pooling_avg_exclude_padding>, avg_pool_grad, schemas, kernels);
  std::vector<graph::AttrSpec> max_pool_grad_attrs = kPoolAttrs;
  max_pool_grad_attrs.push_back({"through_relu", AttrType::boolean, false});
  max_pool_grad_attrs.push_back({"channel_sums", AttrType::boolean, false});
  register_pool_grad("MaxPoolGrad", pool_grad_kernel<true>, std::move(max_pool_grad_attrs), true,
                     "The gradient of max pooling, given its input and the gradient of its output; with through_relu "
                     "(the input being a ReLU's output) also through that ReLU: nothing passes where the window's "
                     "maximum is not positive (made by fuse_max_pool_grad_relu_grad). With channel_sums, output 1 is "
                     "output 0 summed over all but the channel dim, from dy (the gradient of a bias added before the "
                     "pooling; made by fuse_max_pool_grad_bias_grad).",
                     schemas, kernels);
  register_pool_grad("AvgPoolGrad", pool_grad_kernel<false>, kPoolAttrs, false,
                     "The gradient of average pooling, given its input and the gradient of its output.", schemas, kernels);
}

graph::ValueRef max_pool(graph::Builder& b, graph::ValueRef input, const PoolOptions& options) {
  return pool(b, "MaxPool", input, options);
}

graph::ValueRef avg_pool(graph::Builder& b, graph::ValueRef input, const PoolOptions& options) {
  return pool(b, "AvgPool", input, options);
}

}  // namespace mirra::ops
