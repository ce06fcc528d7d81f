// MaxPool and AvgPool: schemas, builders and CPU kernels on f32 and bf16 (oneDNN pooling; the max over
// NHWC 2x2 windows at stride 2, a CNN's, and the pooling gradients by loops of their own) and f64
// (loops).
#include "ops/pool_ops.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/cpu/dnnl_descriptors.h"
#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/widened_16_bit.h"
#include "ops/cpu/window_geometry.h"
#include "ops/op_families.h"
#include "ops/window_attrs.h"
#include "runtime/vector_clones.h"

namespace mirra::ops {

using graph::AttrType;
using graph::bfloat16;
using graph::DType;
using cpu::Type;
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

// How the loops below hold an element of type T (`raw`: bf16 as its bits, which the compiler
// vectorises where it does not for the bf16 class) and the value it is compared and summed as (bf16
// as f32, exactly).
template <class T>
struct Lanes {
  using raw = T;
  static T value(T element) { return element; }
};
template <>
struct Lanes<bfloat16> {
  using raw = uint16_t;
  static float value(uint16_t bits) { return graph::BFloat16Format::to_float(bits); }
};

template <class T>
const typename Lanes<T>::raw* raw_data(const Tensor& tensor) {
  return reinterpret_cast<const typename Lanes<T>::raw*>(tensor.data<T>());
}
template <class T>
typename Lanes<T>::raw* raw_data(Tensor& tensor) {
  return reinterpret_cast<typename Lanes<T>::raw*>(tensor.mutable_data<T>());
}

// The maximum of each window of one output row, from the top and bottom input rows under it. The
// channel loop is plain selections, the first maximum in row-major window order as MaxPoolGrad picks
// it, which the compiler vectorises; it is compiled for AVX-512 and AVX2 too, picked at load time: in
// the CNN's f32 training step it takes 0.4 of the time oneDNN 2.6's pooling took (see
// docs/performance.md). bf16 elements are compared as f32 and selected as they are.
template <class T, class Raw = typename Lanes<T>::raw>
[[gnu::always_inline]] inline void max_pool_2x2_row(const Raw* __restrict top, const Raw* __restrict bottom,
                                                    Raw* __restrict y, int64_t windows, int64_t C) {
  const auto value = Lanes<T>::value;
  for (int64_t w = 0; w < windows; ++w) {
    const Raw* a0 = top + 2 * w * C;
    const Raw* a1 = a0 + C;
    const Raw* a2 = bottom + 2 * w * C;
    const Raw* a3 = a2 + C;
    Raw* out = y + w * C;
    for (int64_t c = 0; c < C; ++c) {
      const Raw best_of_1 = value(a1[c]) > value(a0[c]) ? a1[c] : a0[c];
      const Raw best_of_2 = value(a2[c]) > value(best_of_1) ? a2[c] : best_of_1;
      out[c] = value(a3[c]) > value(best_of_2) ? a3[c] : best_of_2;
    }
  }
}

MIRRA_VECTOR_CLONES void max_pool_2x2_row_vectorised(const float* top, const float* bottom, float* y, int64_t windows,
                                                     int64_t C) {
  max_pool_2x2_row<float>(top, bottom, y, windows, C);
}
MIRRA_VECTOR_CLONES void max_pool_2x2_row_vectorised(const uint16_t* top, const uint16_t* bottom, uint16_t* y,
                                                     int64_t windows, int64_t C) {
  max_pool_2x2_row<bfloat16>(top, bottom, y, windows, C);
}

template <class T>
void max_pool_2x2(const Tensor& input, Tensor& output, const cpu::WindowGeometry& g) {
  const auto* x = raw_data<T>(input);
  auto* y = raw_data<T>(output);
  const int64_t H = g.height, W = g.width, C = g.channels, OH = g.out_height, OW = g.out_width;
  cpu::parallel_for(g.batch, 1, [=](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t oy = 0; oy < OH; ++oy) {
        const int64_t top = (n * H + 2 * oy) * W * C;
        max_pool_2x2_row_vectorised(x + top, x + top + W * C, y + (n * OH + oy) * OW * C, OW, C);
      }
    }
  });
}

// oneDNN's pooling of f32 `input` into f32 `output`.
template <dnnl::algorithm kAlgorithm>
Status dnnl_pool(KernelContext& ctx, const cpu::WindowGeometry& g, const std::vector<int64_t>& ksize,
                 const Tensor& input, Tensor& output) {
  using dnnl::memory;
  const memory::desc src_md({g.batch, g.channels, g.height, g.width}, memory::data_type::f32, g.layout);
  const memory::desc dst_md({g.batch, g.channels, g.out_height, g.out_width}, memory::data_type::f32, g.layout);
  const std::string key =
      cpu::dnnl_key("pool", {static_cast<int64_t>(kAlgorithm), static_cast<int64_t>(g.layout), g.batch, g.channels,
                             g.height, g.width, ksize[0], ksize[1], g.strides[0], g.strides[1], g.pad_before[0],
                             g.pad_before[1], g.pad_after[0], g.pad_after[1]});
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const cpu::DnnlPrimitive> primitive,
                         cpu::cached_dnnl_primitive(ctx.state<cpu::DnnlKernelState>().primitives, key, [&] {
    const auto pd = cpu::pooling_forward_pd(kAlgorithm, src_md, dst_md, g, {ksize[0], ksize[1]},
                                            cpu::dnnl_user_scratchpad());
    return cpu::DnnlPrimitive{dnnl::pooling_forward(pd), pd.scratchpad_desc(), {}};
  }, ctx.device()));
  auto& engine = cpu::dnnl_engine();
  return cpu::dnnl_execute(*primitive, {{DNNL_ARG_SRC, memory(src_md, engine, const_cast<void*>(input.raw_data()))},
                                        {DNNL_ARG_DST, memory(dst_md, engine, output.mutable_raw_data())}}, ctx.device());
}

// MaxPool and AvgPool by a direct loop over the outputs (f64, where exactness matters more than
// speed): the maximum, or the mean of each window's real (unpadded) elements, as TensorFlow's.
template <bool kMax, class T>
void pool_loops(const cpu::WindowGeometry& g, bool nchw, const std::vector<int64_t>& ksize,
                const std::vector<int64_t>& strides, const T* x, T* y) {
  const int64_t H = g.height, W = g.width, C = g.channels, OH = g.out_height, OW = g.out_width;
  const auto at = [&](int64_t n, int64_t h, int64_t w, int64_t c, int64_t height, int64_t width) {
    return nchw ? ((n * C + c) * height + h) * width + w : ((n * height + h) * width + w) * C + c;
  };
  cpu::parallel_for(g.batch * OH, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / OH, oy = row % OH;
      const int64_t top = oy * strides[0] - g.pad_before[0];
      const int64_t y0 = std::max<int64_t>(top, 0), y1 = std::min<int64_t>(top + ksize[0], H);
      for (int64_t ox = 0; ox < OW; ++ox) {
        const int64_t left = ox * strides[1] - g.pad_before[1];
        const int64_t x0 = std::max<int64_t>(left, 0), x1 = std::min<int64_t>(left + ksize[1], W);
        for (int64_t c = 0; c < C; ++c) {
          T result = kMax ? -std::numeric_limits<T>::infinity() : T(0);
          for (int64_t iy = y0; iy < y1; ++iy) {
            for (int64_t ix = x0; ix < x1; ++ix) {
              const T v = x[at(n, iy, ix, c, H, W)];
              result = kMax ? std::max(result, v) : result + v;
            }
          }
          if (!kMax) result /= static_cast<T>((y1 - y0) * (x1 - x0));
          y[at(n, oy, ox, c, OH, OW)] = result;
        }
      }
    }
  });
}

// MaxPool and AvgPool on f32 or bf16 (mixed precision's activations), writing the input's dtype, and
// on f64 by loops.
// oneDNN pools bf16 only on CPUs with AVX-512, so other windows than the 2x2 tiles pool bf16 in f32,
// rounding the result (exact for the maximum).
template <dnnl::algorithm kAlgorithm>
Status pool_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  const auto& strides = ctx.attr<std::vector<int64_t>>("strides");
  const auto g = cpu::WindowGeometry::make(input, nchw, ksize[0], ksize[1], strides, {1, 1},
                                           {.same = ctx.attr<std::string>("padding") == "SAME"});
  Tensor& output = ctx.allocate_output(0, input.dtype(), g.output_shape(nchw, g.channels));
  if (output.num_elements() == 0) return Status();
  if (input.dtype() == DType::f64) {
    pool_loops<kAlgorithm == dnnl::algorithm::pooling_max, double>(g, nchw, ksize, strides, input.data<double>(),
                                                                   output.mutable_data<double>());
    return Status();
  }
  const bool bf16 = input.dtype() == DType::bf16;
  if (kAlgorithm == dnnl::algorithm::pooling_max && tiles_2x2(g, nchw, ksize, strides)) {
    if (bf16) {
      max_pool_2x2<bfloat16>(input, output, g);
    } else {
      max_pool_2x2<float>(input, output, g);
    }
    return Status();
  }
  if (!bf16) return dnnl_pool<kAlgorithm>(ctx, g, ksize, input, output);
  Tensor wide = Tensor::empty(ctx.device().allocator(), DType::f32, output.shape());
  MIRRA_RETURN_IF_ERROR(dnnl_pool<kAlgorithm>(ctx, g, ksize, cpu::as_f32(input, ctx.device()), wide));
  cpu::round_into(wide, output);
  return Status();
}

Expected<std::vector<TensorType>> infer_pool(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::bf16, DType::f64}));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "ksize"));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
  MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  MIRRA_RETURN_IF_ERROR(check_window_extent(ctx, ksize[0], ksize[1], {1, 1}));
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const int64_t channels = ctx.input(0).shape.dim(nchw ? 1 : 3);
  return std::vector<TensorType>{{ctx.input(0).dtype, window_output_shape(ctx, ksize[0], ksize[1], {1, 1}, channels)}};
}

// A gradient of type G sums as its value: bf16 in f32.
template <class G>
using SumOf = decltype(Lanes<G>::value(typename Lanes<G>::raw{}));

// MaxPoolGrad for NHWC 2x2 windows at stride 2 without padding (the common CNN pooling): the windows
// tile the input, so each input element is written once, with its window's gradient where it is the
// first maximum and 0 elsewhere. kThroughRelu: the input is a ReLU's output and the gradient passes
// that ReLU too, so a window whose maximum is not positive passes nothing.
//
// One output row of windows at a time: the top and bottom input rows under it (of type X), their
// gradient rows and dy's row (of type G: dx takes dy's values, so a bf16 dy gives an exact bf16 dx),
// and `sums` (one per channel) gains what each window passes on. The channel loop is written as plain
// selections, which the compiler turns into vector compares and blends; it is compiled for AVX-512 and
// AVX2 as well, picked at load time: 16 or 8 channels at a time instead of a branch per element (it
// was 2.7x slower with branches).
template <class X, class G, bool kThroughRelu, class XRaw = typename Lanes<X>::raw, class GRaw = typename Lanes<G>::raw>
[[gnu::always_inline]] inline void max_pool_grad_2x2_row(const XRaw* __restrict top, const XRaw* __restrict bottom,
                                                         const GRaw* __restrict dy, GRaw* __restrict dx_top,
                                                         GRaw* __restrict dx_bottom, SumOf<G>* __restrict sums,
                                                         int64_t windows, int64_t C) {
  const auto value = Lanes<X>::value;
  const GRaw zero{};
  for (int64_t w = 0; w < windows; ++w) {
    const XRaw* a0 = top + 2 * w * C;
    const XRaw* a1 = a0 + C;
    const XRaw* a2 = bottom + 2 * w * C;
    const XRaw* a3 = a2 + C;
    GRaw* o0 = dx_top + 2 * w * C;
    GRaw* o1 = o0 + C;
    GRaw* o2 = dx_bottom + 2 * w * C;
    GRaw* o3 = o2 + C;
    const GRaw* grad = dy + w * C;
    for (int64_t c = 0; c < C; ++c) {
      // The first maximum in row-major window order, as the general loop picks it: element i wins
      // when it is larger than every element before it and no later one is larger still.
      // With kThroughRelu a window passes only where its maximum is positive: as if a 0 came first,
      // which the elements must beat.
      const auto v0 = value(a0[c]), v1 = value(a1[c]), v2 = value(a2[c]), v3 = value(a3[c]);
      const auto best_of_1 = kThroughRelu ? (v0 > 0 ? v0 : 0) : v0;
      const auto best_of_2 = v1 > best_of_1 ? v1 : best_of_1;
      const auto best_of_3 = v2 > best_of_2 ? v2 : best_of_2;
      const auto best = v3 > best_of_3 ? v3 : best_of_3;
      const GRaw g = grad[c];
      sums[c] += !kThroughRelu || best > 0 ? Lanes<G>::value(g) : SumOf<G>(0);
      o3[c] = v3 > best_of_3 ? g : zero;
      GRaw left = v3 > best_of_3 ? zero : g;  // what is still to place
      o2[c] = v2 > best_of_2 ? left : zero;
      left = v2 > best_of_2 ? zero : left;
      o1[c] = v1 > best_of_1 ? left : zero;
      left = v1 > best_of_1 ? zero : left;
      o0[c] = !kThroughRelu || v0 > 0 ? left : zero;
    }
  }
}

// The row loop compiled for each machine's widest vectors, for an input X and gradient G of f32 or
// bf16 (what mixed precision's activations and their gradients are), through a ReLU or not.
#define MIRRA_MAX_POOL_GRAD_ROWS(X, G)                                                                            \
  MIRRA_VECTOR_CLONES void max_pool_grad_2x2_row_vectorised(                                                     \
      const Lanes<X>::raw* top, const Lanes<X>::raw* bottom, const Lanes<G>::raw* dy, Lanes<G>::raw* dx_top,      \
      Lanes<G>::raw* dx_bottom, SumOf<G>* sums, int64_t windows, int64_t C, Type<X>, Type<G>, std::false_type) {  \
    max_pool_grad_2x2_row<X, G, false>(top, bottom, dy, dx_top, dx_bottom, sums, windows, C);                     \
  }                                                                                                               \
  MIRRA_VECTOR_CLONES void max_pool_grad_2x2_row_vectorised(                                                     \
      const Lanes<X>::raw* top, const Lanes<X>::raw* bottom, const Lanes<G>::raw* dy, Lanes<G>::raw* dx_top,      \
      Lanes<G>::raw* dx_bottom, SumOf<G>* sums, int64_t windows, int64_t C, Type<X>, Type<G>, std::true_type) {   \
    max_pool_grad_2x2_row<X, G, true>(top, bottom, dy, dx_top, dx_bottom, sums, windows, C);                      \
  }
MIRRA_MAX_POOL_GRAD_ROWS(float, float)
MIRRA_MAX_POOL_GRAD_ROWS(bfloat16, bfloat16)
MIRRA_MAX_POOL_GRAD_ROWS(bfloat16, float)
MIRRA_MAX_POOL_GRAD_ROWS(float, bfloat16)
#undef MIRRA_MAX_POOL_GRAD_ROWS

// `sums`: [batch, channels], what each image's windows pass on per channel.
template <class X, class G, bool kThroughRelu>
void max_pool_grad_2x2(const Tensor& input, const Tensor& dy, Tensor& dx, SumOf<G>* sums, const cpu::WindowGeometry& g) {
  const auto* x = raw_data<X>(input);
  const auto* d = raw_data<G>(dy);
  auto* out = raw_data<G>(dx);
  using GRaw = typename Lanes<G>::raw;
  const int64_t H = g.height, W = g.width, C = g.channels, OH = g.out_height, OW = g.out_width;
  cpu::parallel_for(g.batch, 1, [=](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      GRaw* image = out + n * H * W * C;
      // Rows and columns no window covers (an odd height or width) get no gradient.
      if (H > 2 * OH) std::fill_n(image + 2 * OH * W * C, (H - 2 * OH) * W * C, GRaw{});
      for (int64_t oy = 0; oy < OH; ++oy) {
        if (W > 2 * OW) {
          for (int64_t row = 2 * oy; row < 2 * oy + 2; ++row) {
            std::fill_n(image + (row * W + 2 * OW) * C, (W - 2 * OW) * C, GRaw{});
          }
        }
        const int64_t top = (n * H + 2 * oy) * W * C, bottom = top + W * C;
        const GRaw* grad = d + (n * OH + oy) * OW * C;
        if constexpr (std::is_same_v<G, double>) {
          max_pool_grad_2x2_row<X, G, kThroughRelu>(x + top, x + bottom, grad, out + top, out + bottom, sums + n * C, OW, C);
        } else {
          max_pool_grad_2x2_row_vectorised(x + top, x + bottom, grad, out + top, out + bottom, sums + n * C, OW, C,
                                           Type<X>{}, Type<G>{}, std::bool_constant<kThroughRelu>{});
        }
      }
    }
  });
}

// The pooling gradient problem: the windows (the node's attributes, not copied), and for MaxPoolGrad
// whether it passes through a ReLU.
struct PoolGradProblem {
  cpu::WindowGeometry g;
  bool nchw;
  const std::vector<int64_t>& ksize;
  const std::vector<int64_t>& strides;
  bool through_relu;
};

// The gradients of pooling, by direct loops on `x` and `dy` of one type T (NHWC: an image per task;
// NCHW: a (batch, channel) plane): the max's gradient goes to the first largest element of each window
// (with through_relu, only where that element is positive), and `sums` gains what passed per image
// and channel; the average's is shared by the window's real (unpadded) elements.
template <bool kMax, class T>
void pool_grad_loops(const PoolGradProblem& p, const T* x, const T* d, T* out, T* sums) {
  const cpu::WindowGeometry& g = p.g;
  const bool nchw = p.nchw, through_relu = p.through_relu;
  const std::vector<int64_t>& ksize = p.ksize;
  const std::vector<int64_t>& strides = p.strides;
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
    return;
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
}

// The pooling gradient of `input` and `dy` into `dx`, with what passed per image and channel added to
// `image_sums` (of dy's sum type). The 2x2 tiles run natively on any mix of f32 and bf16; elsewhere a
// bf16 input or dy is widened to f32 and a bf16 dx rounded from f32 (dy's values, or their sums where
// windows overlap).
template <bool kMax>
Status pool_grad(KernelContext& ctx, const PoolGradProblem& p, const Tensor& input, const Tensor& dy, Tensor& dx,
                 Tensor& image_sums) {
  if (kMax && tiles_2x2(p.g, p.nchw, p.ksize, p.strides)) {
    const auto run = [&]<class X, class G>(cpu::Type<X>, cpu::Type<G>) {
      using Sum = SumOf<G>;
      if (p.through_relu) {
        max_pool_grad_2x2<X, G, true>(input, dy, dx, image_sums.mutable_data<Sum>(), p.g);
      } else {
        max_pool_grad_2x2<X, G, false>(input, dy, dx, image_sums.mutable_data<Sum>(), p.g);
      }
      return Status();
    };
    if (input.dtype() == DType::f64) return run(cpu::Type<double>{}, cpu::Type<double>{});
    return cpu::visit_dtype<float, bfloat16>(input.dtype(), [&]<class X>(cpu::Type<X> x) {
      return cpu::visit_dtype<float, bfloat16>(dy.dtype(), [&]<class G>(cpu::Type<G> g) { return run(x, g); });
    });
  }
  if (dx.dtype() != DType::bf16 && input.dtype() != DType::bf16) {
    return cpu::visit_dtype<float, double>(input.dtype(), [&]<class T>(cpu::Type<T>) {
      pool_grad_loops<kMax, T>(p, input.data<T>(), dy.data<T>(), dx.mutable_data<T>(), image_sums.mutable_data<T>());
      return Status();
    });
  }
  const Tensor x = cpu::as_f32(input, ctx.device());
  const Tensor d = cpu::as_f32(dy, ctx.device());
  Tensor wide = dx.dtype() == DType::f32 ? dx : Tensor::empty(ctx.device().allocator(), DType::f32, dx.shape());
  pool_grad_loops<kMax, float>(p, x.data<float>(), d.data<float>(), wide.mutable_data<float>(),
                               image_sums.mutable_data<float>());
  if (dx.dtype() == DType::bf16) cpu::round_into(wide, dx);
  return Status();
}

// f64 for f64 gradients, else f32: what a gradient of `dtype` sums in.
DType sum_dtype(DType dtype) { return dtype == DType::f64 ? DType::f64 : DType::f32; }

// MaxPoolGrad and AvgPoolGrad: dx has dy's dtype and the input's shape; with channel_sums (MaxPoolGrad)
// output 1 is what passed per channel, in dy's sum type.
template <bool kMax>
Status pool_grad_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  PoolGradProblem p{.nchw = ctx.attr<std::string>("data_format") == "NCHW",
                    .ksize = ctx.attr<std::vector<int64_t>>("ksize"),
                    .strides = ctx.attr<std::vector<int64_t>>("strides"),
                    .through_relu = kMax && ctx.attr<bool>("through_relu")};
  p.g = cpu::WindowGeometry::make(input, p.nchw, p.ksize[0], p.ksize[1], p.strides, {1, 1},
                                  {.same = ctx.attr<std::string>("padding") == "SAME"});
  if (!(dy.shape() == p.g.output_shape(p.nchw, p.g.channels))) {
    return graph::invalid_argument("dy " + dy.type_string() + " does not match the pooled shape of " + input.type_string());
  }
  Tensor& dx = ctx.allocate_output(0, dy.dtype(), input.shape());
  // What each image's windows pass on, per channel: [batch, channels], summed over the batch in
  // order into output 1 when channel_sums asks for it (the bias gradient, for any thread count).
  const DType sums_dtype = sum_dtype(dy.dtype());
  Tensor image_sums = Tensor::empty(ctx.device().allocator(), sums_dtype,
                                    kMax ? TensorShape{p.g.batch, p.g.channels} : TensorShape{0});
  if (image_sums.byte_size() > 0) std::memset(image_sums.mutable_raw_data(), 0, image_sums.byte_size());
  MIRRA_RETURN_IF_ERROR(pool_grad<kMax>(ctx, p, input, dy, dx, image_sums));
  if (!kMax || !ctx.attr<bool>("channel_sums")) return Status();
  Tensor& sums = ctx.allocate_output(1, sums_dtype, TensorShape{p.g.channels});
  return cpu::visit_dtype<float, double>(sums_dtype, [&]<class T>(cpu::Type<T>) {
    T* total = sums.mutable_data<T>();
    const T* per_image = image_sums.data<T>();
    std::fill_n(total, p.g.channels, T(0));
    for (int64_t n = 0; n < p.g.batch; ++n) {
      for (int64_t c = 0; c < p.g.channels; ++c) total[c] += per_image[n * p.g.channels + c];
    }
    return Status();
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

// A pooling gradient's input and dy: each f32 or bf16 (mixed precision's activations and their
// gradients), or both f64.
Status check_pool_grad_dtypes(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::bf16, DType::f64}));
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 1, {DType::f32, DType::bf16, DType::f64}));
  if ((ctx.input(0).dtype == DType::f64) != (ctx.input(1).dtype == DType::f64)) return require_same_dtype(ctx);
  return Status();
}

// A pooling gradient on (input, dy); with `channel_sums`, MaxPoolGrad's attribute of that name may ask
// for output 1 (a vector of the channels).
void register_pool_grad(const char* name, runtime::KernelFn kernel, std::vector<graph::AttrSpec> attrs, bool channel_sums,
                        const char* summary, graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"input", "dy"},
                              .attrs = std::move(attrs),
                              .infer = [channel_sums](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                MIRRA_RETURN_IF_ERROR(check_pool_grad_dtypes(ctx));
                                MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
                                MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 4));
                                MIRRA_RETURN_IF_ERROR(check_pair(ctx, "ksize"));
                                MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
                                MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
                                const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
                                MIRRA_RETURN_IF_ERROR(check_window_extent(ctx, ksize[0], ksize[1], {1, 1}));
                                std::vector<TensorType> outputs = {{ctx.input(1).dtype, ctx.input(0).shape}};
                                if (channel_sums && ctx.attr<bool>("channel_sums")) {
                                  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
                                  outputs.push_back({sum_dtype(ctx.input(1).dtype), Shape{ctx.input(0).shape.dim(nchw ? 1 : 3)}});
                                }
                                return outputs;
                              },
                              .summary = summary,
                              .no_gradient = "second derivatives of pooling are not supported"});
  kernels.add(name, graph::DeviceKind::cpu, {kernel, /*expensive=*/true});
}

// `moves_values`: the inputs whose values output 0 holds unchanged (see OpSchema).
void register_pool(const char* name, runtime::KernelFn kernel, graph::GradientFn gradient, std::vector<size_t> moves_values,
                   graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"input"},
                              .attrs = kPoolAttrs,
                              .moves_values = std::move(moves_values),
                              .infer = infer_pool,
                              .summary = "2-D pooling over ksize windows.",
                              .gradient = std::move(gradient)});
  kernels.add(name, graph::DeviceKind::cpu, {.fn = kernel, .expensive = true, .prepare = cpu::prepare_dnnl_kernel});
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
  // A maximum is one of its window's values.
  register_pool("MaxPool", pool_kernel<dnnl::algorithm::pooling_max>, max_pool_grad, {0}, schemas, kernels);
  register_pool("AvgPool", pool_kernel<dnnl::algorithm::pooling_avg_exclude_padding>, avg_pool_grad, {}, schemas, kernels);
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
