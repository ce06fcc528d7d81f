// Conv2D, FusedConv2D (with bias and ReLU) and Conv2D's two backprop ops: schemas, builders and CPU
// kernels (oneDNN convolution primitives in f32 or bf16, f16 widened to f32, kept per node with the
// node's parsed attributes; f64, which oneDNN does not convolve, as im2col products through
// OpenBLAS; NHWC/NCHW data, HWIO filters reordered to oneDNN's preferred layout).
#include "ops/conv_ops.h"

#include <cstring>

#include "graph/float16.h"
#include "ops/cpu/dnnl_descriptors.h"
#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/im2col_convolution.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/widened_16_bit.h"
#include "ops/cpu/window_geometry.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/window_attrs.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

// What a convolution kernel keeps for its node, built when the plan is: its attributes parsed, and
// the oneDNN primitives of the problems it saw last.
struct ConvKernelState : cpu::DnnlKernelState {
  bool nchw = false;
  WindowPadding padding;
  bool f32_output = false;
  bool relu = false;  // FusedConv2D's activation
  std::vector<int64_t> strides, dilations;
};

Expected<std::unique_ptr<runtime::KernelState>> prepare_conv_kernel(const graph::Node& node,
                                                                  const runtime::Device& /*device*/) {
  auto state = std::make_unique<ConvKernelState>();
  state->nchw = graph::checked_attr<std::string>(node, "data_format") == "NCHW";
  state->padding = WindowPadding::of(node.attrs);
  state->f32_output = graph::checked_attr<bool>(node, "f32_output");
  state->strides = graph::checked_attr<std::vector<int64_t>>(node, "strides");
  state->dilations = graph::checked_attr<std::vector<int64_t>>(node, "dilations");
  return std::unique_ptr<runtime::KernelState>(std::move(state));
}

Expected<std::unique_ptr<runtime::KernelState>> prepare_fused_conv_kernel(const graph::Node& node,
                                                                        const runtime::Device& device) {
  MIRRA_ASSIGN_OR_RETURN(std::unique_ptr<runtime::KernelState> state, prepare_conv_kernel(node, device));
  static_cast<ConvKernelState&>(*state).relu = graph::checked_attr<std::string>(node, "activation") == "relu";
  return state;
}

ConvKernelState& conv_state(const KernelContext& ctx) { return ctx.state<ConvKernelState>(); }

// The node's convolution on `input` and `filter` as the im2col path computes it (f64).
cpu::UnfoldedConvolution unfolded_problem(KernelContext& ctx, const Tensor& input, const Tensor& filter) {
  const ConvKernelState& s = conv_state(ctx);
  return {.g = cpu::WindowGeometry::make(input, s.nchw, filter.dim(0), filter.dim(1), s.strides, s.dilations, s.padding),
          .filter_height = filter.dim(0),
          .filter_width = filter.dim(1),
          .out_channels = filter.dim(3),
          .nchw = s.nchw,
          .scratch = ctx.device().allocator()};
}

// A convolution problem as oneDNN sees it: geometry, the type of the operands (input, filter and dy:
// f32 or bf16) and of the result, and memory descriptors in mirra's plain layouts. Primitives let
// oneDNN choose the filter layout (its blocked layouts run 1.5-2x faster than HWIO); data stays NHWC
// or NCHW.
struct ConvProblem {
  using data_type = dnnl::memory::data_type;

  cpu::WindowGeometry g;
  int64_t out_channels = 0, filter_height = 0, filter_width = 0;
  data_type operands = data_type::f32, result = data_type::f32;

  static ConvProblem make(KernelContext& ctx, const Tensor& input, const Tensor& filter, DType result) {
    return ConvProblem{unfolded_problem(ctx, input, filter).g, filter.dim(3), filter.dim(0), filter.dim(1),
                       dnnl_type(input.dtype()), dnnl_type(result)};
  }

  // The types oneDNN convolves here: f16 arrives widened (ConvOperands), f64 goes the im2col way.
  static data_type dnnl_type(DType dtype) {
    MIRRA_CHECK(dtype == DType::f32 || dtype == DType::bf16, "a convolution gave oneDNN a type it does not convolve here");
    return dtype == DType::bf16 ? data_type::bf16 : data_type::f32;
  }

  dnnl::memory::desc src(data_type type) const {
    return {{g.batch, g.channels, g.height, g.width}, type, g.layout};
  }
  dnnl::memory::desc dst(data_type type) const {
    return {{g.batch, out_channels, g.out_height, g.out_width}, type, g.layout};
  }
  dnnl::memory::desc weights(data_type type, dnnl::memory::format_tag tag = dnnl::memory::format_tag::hwio) const {
    return {{out_channels, g.channels, filter_height, filter_width}, type, tag};
  }
  // The filter with its layout left to oneDNN.
  dnnl::memory::desc any_weights(data_type type) const { return weights(type, dnnl::memory::format_tag::any); }

  // Identifies the primitive for `direction` (forward, backward data or weights).
  std::string key(const char* direction) const {
    return cpu::dnnl_key(direction, {static_cast<int64_t>(g.layout), static_cast<int64_t>(operands),
                                     static_cast<int64_t>(result), g.batch, g.channels, g.height, g.width, out_channels,
                                     filter_height, filter_width, g.strides[0], g.strides[1], g.dilations[0],
                                     g.dilations[1], g.pad_before[0], g.pad_before[1], g.pad_after[0], g.pad_after[1]});
  }

  // The forward pass in the operands' type: the hint the backward primitives are built against.
  dnnl::convolution_forward::primitive_desc training_hint(const dnnl::primitive_attr& attr) const {
    return cpu::convolution_forward_pd(dnnl::prop_kind::forward_training, src(operands), any_weights(operands),
                                       nullptr, dst(operands), g, attr);
  }
};

// The operands of a convolution kernel, widened to f32 where oneDNN cannot multiply their type here
// (ops/cpu/widened_16_bit.h).
struct ConvOperands {
  Tensor input, filter, third;  // third: the bias of FusedConv2D, dy of the backprop ops

  static ConvOperands of(KernelContext& ctx) {
    ConvOperands o{cpu::widened(ctx.input(0), ctx.device()), cpu::widened(ctx.input(1), ctx.device()), {}};
    if (ctx.num_inputs() > 2) o.third = cpu::widened(ctx.input(2), ctx.device());
    return o;
  }
};

// The node's output dtype (f32_output, see product_output_dtype).
DType result_dtype(KernelContext& ctx) { return conv_state(ctx).f32_output ? DType::f32 : ctx.input(0).dtype(); }

// True (and the output zero-filled) when there is nothing for oneDNN to compute.
bool zero_sized(const ConvOperands& o, Tensor& out) {
  if (out.num_elements() > 0 && o.input.num_elements() > 0 && o.filter.num_elements() > 0 &&
      o.third.num_elements() > 0) {
    return false;
  }
  if (out.byte_size() > 0) std::memset(out.mutable_raw_data(), 0, out.byte_size());  // 0 in every float type
  return true;
}

dnnl::memory plain(const dnnl::memory::desc& desc, const Tensor& tensor) {
  return dnnl::memory(desc, cpu::dnnl_engine(), const_cast<void*>(tensor.raw_data()));
}

// Element i of a bias (f32, f64 or bf16) as a double.
double bias_at(const Tensor& bias, int64_t i) {
  switch (bias.dtype()) {
    case DType::bf16: return static_cast<float>(bias.data<graph::bfloat16>()[i]);
    case DType::f64: return bias.data<double>()[i];
    default: return bias.data<float>()[i];
  }
}

// Output i's channel, in the output's layout.
int64_t output_channel(const cpu::WindowGeometry& g, int64_t out_channels, bool nchw, int64_t i) {
  return nchw ? i / (g.out_height * g.out_width) % out_channels : i % out_channels;
}

// A convolution without input channels: every output is the bias (or 0), through the ReLU if any.
void fill_with_bias(const cpu::WindowGeometry& g, int64_t out_channels, bool nchw, const Tensor* bias, bool relu,
                    Tensor& output) {
  for (int64_t i = 0; i < output.num_elements(); ++i) {
    double value = bias == nullptr ? 0.0 : bias_at(*bias, output_channel(g, out_channels, nchw, i));
    if (relu) value = std::max(value, 0.0);
    switch (output.dtype()) {
      case DType::bf16: output.mutable_data<graph::bfloat16>()[i] = graph::bfloat16(static_cast<float>(value)); break;
      case DType::f64: output.mutable_data<double>()[i] = value; break;
      default: output.mutable_data<float>()[i] = static_cast<float>(value);
    }
  }
}

// Conv2D or FusedConv2D in f64: the im2col product, then the bias and the ReLU in one sweep.
Status conv2d_forward_f64(KernelContext& ctx, const ConvOperands& o, const Tensor* bias, bool relu, Tensor& output) {
  const cpu::UnfoldedConvolution c = unfolded_problem(ctx, o.input, o.filter);
  if (o.input.num_elements() == 0 || o.filter.num_elements() == 0) {
    fill_with_bias(c.g, c.out_channels, c.nchw, bias, relu, output);
    return Status();
  }
  double* y = output.mutable_data<double>();
  cpu::im2col_conv2d_forward(c, o.input.data<double>(), o.filter.data<double>(), y);
  if (bias == nullptr && !relu) return Status();
  cpu::parallel_for(output.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (bias != nullptr) y[i] += bias_at(*bias, output_channel(c.g, c.out_channels, c.nchw, i));
      if (relu) y[i] = std::max(y[i], 0.0);
    }
  });
  return Status();
}

// The oneDNN forward convolution of conv2d_forward (below), into `output`.
Status dnnl_conv2d_forward(KernelContext& ctx, const ConvProblem& c, const ConvOperands& o, const Tensor* bias, bool relu,
                          Tensor& output) {
  using dnnl::memory;
  // The bias in its own type: the result's, or f32 for a 16-bit result (added to the f32 sums before
  // they are rounded, as a separate BiasAdd on an f32 result would).
  const memory::data_type bias_type = bias == nullptr ? c.result : ConvProblem::dnnl_type(bias->dtype());
  const memory::desc bias_md({c.out_channels}, bias_type, memory::format_tag::x);
  std::string kind = bias == nullptr ? "conv2d/forward" : relu ? "conv2d/forward_bias_relu" : "conv2d/forward_bias";
  if (bias_type != c.result) kind += "/f32_bias";
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const cpu::DnnlPrimitive> primitive,
                         cpu::cached_dnnl_primitive(conv_state(ctx).primitives, c.key(kind.c_str()), [&] {
    dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
    if (relu) attr.set_post_ops(cpu::relu_post_op());
    const auto pd = cpu::convolution_forward_pd(dnnl::prop_kind::forward_inference, c.src(c.operands),
                                                c.any_weights(c.operands), bias == nullptr ? nullptr : &bias_md,
                                                c.dst(c.result), c.g, attr);
    cpu::DnnlPrimitive p{dnnl::convolution_forward(pd), pd.scratchpad_desc(), {}};
    p.relayout(DNNL_ARG_WEIGHTS, c.weights(c.operands), pd.weights_desc(), /*output=*/false);
    return p;
  }, ctx.device()));
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, plain(c.src(c.operands), o.input)},
                                                {DNNL_ARG_WEIGHTS, plain(c.weights(c.operands), o.filter)},
                                                {DNNL_ARG_DST, plain(c.dst(c.result), output)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, plain(bias_md, *bias));
  return cpu::dnnl_execute(*primitive, std::move(args), ctx.device());
}

// Conv2D, or FusedConv2D with a bias (input 2) and optionally a ReLU applied by oneDNN as it writes
// the output (post-ops), which saves the two passes over it that BiasAdd and Relu would make.
Status conv2d_forward(KernelContext& ctx, bool with_bias) {
  const ConvOperands o = ConvOperands::of(ctx);
  const Tensor* bias = with_bias ? &o.third : nullptr;
  const bool nchw = conv_state(ctx).nchw;
  const bool relu = conv_state(ctx).relu;
  MIRRA_RETURN_IF_ERROR(check_conv_operands(ctx, o.input, o.filter, bias, nchw, result_dtype(ctx)));
  const cpu::UnfoldedConvolution geometry = unfolded_problem(ctx, o.input, o.filter);
  Tensor& node_output = ctx.allocate_output(0, result_dtype(ctx), geometry.g.output_shape(nchw, geometry.out_channels));
  if (node_output.num_elements() == 0) return Status();
  if (o.input.dtype() == DType::f64) return conv2d_forward_f64(ctx, o, bias, relu, node_output);
  return cpu::compute_widened(node_output, ctx.device(), [&](Tensor& output) -> Status {
    const ConvProblem c = ConvProblem::make(ctx, o.input, o.filter, output.dtype());
    if (o.input.num_elements() == 0 || o.filter.num_elements() == 0) {
      fill_with_bias(c.g, c.out_channels, nchw, bias, relu, output);
      return Status();
    }
    return dnnl_conv2d_forward(ctx, c, o, bias, relu, output);
  });
}

Status conv2d_kernel(KernelContext& ctx) { return conv2d_forward(ctx, /*with_bias=*/false); }

Status fused_conv2d_kernel(KernelContext& ctx) { return conv2d_forward(ctx, /*with_bias=*/true); }

// Conv2D's two gradients: allocates the one of `shape` and runs `compute` on the problem and where the
// gradient goes (ops/cpu/widened_16_bit.h), or zero-fills it when there is nothing to compute.
template <class Compute>
Status conv_gradient(KernelContext& ctx, const ConvOperands& o, const runtime::TensorShape& shape, Compute&& compute) {
  Tensor& gradient = ctx.allocate_output(0, result_dtype(ctx), shape);
  return cpu::compute_widened(gradient, ctx.device(), [&](Tensor& out) -> Status {
    if (zero_sized(o, out)) return Status();
    return compute(ConvProblem::make(ctx, o.input, o.filter, out.dtype()), out);
  });
}

// Conv2D's gradient in f64 through `compute(problem, gradient)` (the im2col path), or zeros when there
// is nothing to compute.
template <class Compute>
Status im2col_conv_gradient(KernelContext& ctx, const ConvOperands& o, const runtime::TensorShape& shape,
                            Compute&& compute) {
  Tensor& gradient = ctx.allocate_output(0, DType::f64, shape);
  if (zero_sized(o, gradient)) return Status();
  compute(unfolded_problem(ctx, o.input, o.filter), gradient.mutable_data<double>());
  return Status();
}

// The filter of the forward convolution that computes Conv2D's input gradient at stride 1: W'[kh][kw]
// [co][ci] = W[KH-1-kh][KW-1-kw][ci][co] (HWIO both), the window turned around and the channels swapped.
template <class Bits>
void turned_filter(const Tensor& filter, Tensor& turned) {
  const int64_t KH = filter.dim(0), KW = filter.dim(1), CI = filter.dim(2), CO = filter.dim(3);
  const Bits* w = static_cast<const Bits*>(filter.raw_data());
  Bits* t = static_cast<Bits*>(turned.mutable_raw_data());
  for (int64_t kh = 0; kh < KH; ++kh) {
    for (int64_t kw = 0; kw < KW; ++kw) {
      const Bits* tap = w + ((KH - 1 - kh) * KW + (KW - 1 - kw)) * CI * CO;
      Bits* out = t + (kh * KW + kw) * CO * CI;
      for (int64_t co = 0; co < CO; ++co) {
        for (int64_t ci = 0; ci < CI; ++ci) out[co * CI + ci] = tap[ci * CO + co];
      }
    }
  }
}

// At stride 1 without dilation, Conv2D's input gradient is a forward convolution of dy with the
// turned filter, padded by KH-1-pad (and KW-1-pad) on each side. oneDNN's forward kernels (brgconv)
// run it 2-2.5x faster than its backward-data kernels on the CNN's layers, in f32 and in bf16; it is
// also the forward primitive of that geometry, cached once for both.
Status input_gradient_as_forward(KernelContext& ctx, const ConvProblem& c, const ConvOperands& o, Tensor& dx) {
  cpu::WindowGeometry g = c.g;
  g.channels = c.out_channels;
  std::swap(g.height, g.out_height);
  std::swap(g.width, g.out_width);
  g.pad_before = {c.filter_height - 1 - c.g.pad_before[0], c.filter_width - 1 - c.g.pad_before[1]};
  g.pad_after = {c.filter_height - 1 - c.g.pad_after[0], c.filter_width - 1 - c.g.pad_after[1]};
  const ConvProblem turned{g, c.g.channels, c.filter_height, c.filter_width, c.operands, c.result};
  Tensor filter = Tensor::empty(ctx.device().allocator(), o.filter.dtype(),
                                runtime::TensorShape{c.filter_height, c.filter_width, c.out_channels, c.g.channels});
  if (graph::dtype_size(o.filter.dtype()) == 2) {
    turned_filter<uint16_t>(o.filter, filter);
  } else {
    turned_filter<uint32_t>(o.filter, filter);
  }
  return dnnl_conv2d_forward(ctx, turned, ConvOperands{o.third, filter, {}}, nullptr, false, dx);
}

// d loss / d input of Conv2D: inputs (input, filter, dy); `input` gives the shape.
Status conv2d_backprop_input_kernel(KernelContext& ctx) {
  const ConvOperands o = ConvOperands::of(ctx);
  if (o.input.dtype() == DType::f64) {
    return im2col_conv_gradient(ctx, o, o.input.shape(), [&](const cpu::UnfoldedConvolution& c, double* dx) {
      cpu::im2col_conv2d_backward_data(c, o.third.data<double>(), o.filter.data<double>(), dx);
    });
  }
  return conv_gradient(ctx, o, o.input.shape(), [&](const ConvProblem& c, Tensor& dx) -> Status {
    const bool unit_stride = c.g.strides == dnnl::memory::dims{1, 1} && c.g.dilations == dnnl::memory::dims{0, 0};
    if (unit_stride) return input_gradient_as_forward(ctx, c, o, dx);
    MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const cpu::DnnlPrimitive> primitive,
                           cpu::cached_dnnl_primitive(conv_state(ctx).primitives, c.key("conv2d/backward_data"), [&] {
      const dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
      const auto pd = cpu::convolution_backward_data_pd(c.src(c.result), c.any_weights(c.operands),
                                                        c.dst(c.operands), c.g, c.training_hint(attr), attr);
      cpu::DnnlPrimitive p{dnnl::convolution_backward_data(pd), pd.scratchpad_desc(), {}};
      p.relayout(DNNL_ARG_WEIGHTS, c.weights(c.operands), pd.weights_desc(), /*output=*/false);
      return p;
    }, ctx.device()));
    return cpu::dnnl_execute(*primitive, {{DNNL_ARG_DIFF_DST, plain(c.dst(c.operands), o.third)},
                                          {DNNL_ARG_WEIGHTS, plain(c.weights(c.operands), o.filter)},
                                          {DNNL_ARG_DIFF_SRC, plain(c.src(c.result), dx)}},
                             ctx.device());
  });
}

// Conv2D's filter gradient runs on one thread. The backward pass runs it beside the layer's input
// gradient, and oneDNN's backward-weights kernels (on OpenMP) hold their team together with spin
// barriers: beside another kernel a team of two waits for its descheduled member at every barrier,
// and AMX's kernel (`jit:avx512_core_amx_bf16`) took up to a second per call instead of 2 ms on a
// 2-core Xeon. One thread each: ResNet-20 in bf16 trained 11-17x faster there, in f32 13% faster, and
// the CNN 17-29% faster in bf16 (docs/performance.md, "The filter gradient on one thread").
constexpr int kFilterGradientThreads = 1;

// d loss / d filter of Conv2D: inputs (input, filter, dy); `filter` gives the shape.
Status conv2d_backprop_filter_kernel(KernelContext& ctx) {
  const ConvOperands o = ConvOperands::of(ctx);
  if (o.input.dtype() == DType::f64) {
    return im2col_conv_gradient(ctx, o, o.filter.shape(), [&](const cpu::UnfoldedConvolution& c, double* dw) {
      cpu::im2col_conv2d_backward_filter(c, o.input.data<double>(), o.third.data<double>(), dw);
    });
  }
  return conv_gradient(ctx, o, o.filter.shape(), [&](const ConvProblem& c, Tensor& dw) -> Status {
    MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<const cpu::DnnlPrimitive> primitive,
                           cpu::cached_dnnl_primitive(conv_state(ctx).primitives, c.key("conv2d/backward_weights"), [&] {
      const dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
      const auto pd = cpu::convolution_backward_weights_pd(c.src(c.operands), c.any_weights(c.result),
                                                           c.dst(c.operands), c.g, c.training_hint(attr), attr);
      cpu::DnnlPrimitive p{dnnl::convolution_backward_weights(pd), pd.scratchpad_desc(), {}};
      p.relayout(DNNL_ARG_DIFF_WEIGHTS, c.weights(c.result), pd.diff_weights_desc(), /*output=*/true);
      return p;
    }, ctx.device(), kFilterGradientThreads));
    return cpu::dnnl_execute(*primitive, {{DNNL_ARG_SRC, plain(c.src(c.operands), o.input)},
                                          {DNNL_ARG_DIFF_DST, plain(c.dst(c.operands), o.third)},
                                          {DNNL_ARG_DIFF_WEIGHTS, plain(c.weights(c.result), dw)}},
                             ctx.device(), kFilterGradientThreads);
  });
}

std::vector<graph::ValueRef> conv2d_grad(graph::GradientContext& g) {
  auto& b = g.builder;
  if (g.attr<bool>("f32_output")) {
    b.fail(graph::unimplemented("Conv2D with f32_output has no gradient: mixed precision rewrites the graph after "
                                "differentiation"));
    return std::vector<graph::ValueRef>(2);
  }
  const graph::AttrMap attrs = copy_attrs(g.node, {"strides", "padding", "explicit_paddings", "dilations", "data_format"});
  std::vector<graph::ValueRef> grads(2);
  for (size_t i : {0u, 1u}) {
    if (!g.needs(i)) continue;
    grads[i] = b.add_value({.op = i == 0 ? "Conv2DBackpropInput" : "Conv2DBackpropFilter",
                            .inputs = {g.input(0), g.input(1), g.grad(0)},
                            .attrs = attrs});
  }
  return grads;
}

// Each element of `result` (a convolution's output, or the dy its gradients read) sums kh x kw x in
// products of the filter [kh, kw, in, out], input 1: the forward pass and each gradient alike.
graph::OpCost convolution_cost(const graph::CostContext& c, const graph::TensorType& result) {
  const graph::Shape& filter = c.inputs[1].shape;
  double per_output = 1;
  for (int d = 0; d < 3; ++d) per_output *= static_cast<double>(std::max<int64_t>(filter.dim(d), 0));
  return graph::product_cost(c, graph::CostContext::elements(result) * per_output);
}

void register_conv_backprop(const char* name, runtime::KernelFn kernel, size_t shape_from, graph::OpRegistry& schemas,
                            runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = name,
      .inputs = {"input", "filter", "dy"},
      .attrs = {{"strides", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"padding", AttrType::string, std::string("SAME")},
                {"explicit_paddings", AttrType::int_list, std::vector<int64_t>{}},
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")},
                {"f32_output", AttrType::boolean, false}},
      .product_operands = 3,
      .filter_input = 1,
      .infer = [shape_from](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_ASSIGN_OR_RETURN(const DType output, product_output_dtype(ctx, 3));
        for (size_t i = 0; i < 3; ++i) MIRRA_RETURN_IF_ERROR(require_rank(ctx, i, 4));
        MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
        MIRRA_RETURN_IF_ERROR(check_pair(ctx, "dilations"));
        MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx, /*explicit_allowed=*/true));
        const Shape& filter = ctx.input(1).shape;
        if (filter.is_fully_defined()) {
          MIRRA_RETURN_IF_ERROR(check_explicit_padding_fits(ctx, filter.dim(0), filter.dim(1),
                                                            ctx.attr<std::vector<int64_t>>("dilations")));
        }
        return std::vector<TensorType>{{output, ctx.input(shape_from).shape}};
      },
      .cost = [](const graph::CostContext& c) { return convolution_cost(c, c.inputs[2]); },
      .summary = "A gradient of Conv2D, given its input, filter and the gradient of its output.",
      .no_gradient = "second derivatives of Conv2D are not supported"});
  kernels.add(name, graph::DeviceKind::cpu, {.fn = kernel, .expensive = true, .prepare = prepare_conv_kernel});
}

Expected<std::vector<TensorType>> infer_conv2d(const InferContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const DType output, product_output_dtype(ctx, 2));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 4));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "dilations"));
  MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx, /*explicit_allowed=*/true));
  const Shape& filter = ctx.input(1).shape;
  if (!filter.is_fully_defined()) return ctx.error("filter shape must be fully defined");
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const int64_t channels = ctx.input(0).shape.dim(nchw ? 1 : 3);
  if (channels >= 0 && channels != filter.dim(2)) return ctx.error("filter's input channels differ from the input's");
  if (filter.dim(0) < 1 || filter.dim(1) < 1) return ctx.error("filter window must be at least 1x1");
  MIRRA_RETURN_IF_ERROR(check_window_extent(ctx, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations")));
  MIRRA_RETURN_IF_ERROR(check_explicit_padding_fits(ctx, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations")));
  return std::vector<TensorType>{{output, window_output_shape(ctx, filter.dim(0), filter.dim(1),
                                                                   ctx.attr<std::vector<int64_t>>("dilations"),
                                                                   filter.dim(3))}};
}

Expected<std::vector<TensorType>> infer_fused_conv2d(const InferContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(std::vector<TensorType> output, infer_conv2d(ctx));
  const Shape& bias = ctx.input(2).shape;
  if (bias.rank() != 1 || bias.dim(0) != ctx.input(1).shape.dim(3)) {
    return ctx.error("bias must be a vector of the filter's output channels");
  }
  if (ctx.input(2).dtype != output[0].dtype && ctx.input(2).dtype != DType::f32) {
    return ctx.error("bias must be f32 or have the output's dtype");
  }
  const std::string& activation = ctx.attr<std::string>("activation");
  if (activation != "relu" && activation != "none") return ctx.error("activation must be relu or none");
  return output;
}

}  // namespace

void register_conv_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "Conv2D",
      .inputs = {"input", "filter"},
      .attrs = {{"strides", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"padding", AttrType::string, std::string("SAME")},
                {"explicit_paddings", AttrType::int_list, std::vector<int64_t>{}},
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")},
                {"f32_output", AttrType::boolean, false}},
      .product_operands = 2,
      .filter_input = 1,
      .infer = infer_conv2d,
      .cost = [](const graph::CostContext& c) { return convolution_cost(c, c.outputs[0]); },
      .summary = "2-D convolution with an HWIO filter.",
      .gradient = conv2d_grad});
  kernels.add("Conv2D", graph::DeviceKind::cpu, {.fn = conv2d_kernel, .expensive = true, .prepare = prepare_conv_kernel});
  schemas.add(graph::OpSchema{
      .name = "FusedConv2D",
      .inputs = {"input", "filter", "bias"},
      .attrs = {{"strides", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"padding", AttrType::string, std::string("SAME")},
                {"explicit_paddings", AttrType::int_list, std::vector<int64_t>{}},
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")},
                {"activation", AttrType::string, std::string("relu")},
                {"f32_output", AttrType::boolean, false}},
      .product_operands = 2,  // the bias is added to the f32 sums
      .filter_input = 1,
      .infer = infer_fused_conv2d,
      .cost = [](const graph::CostContext& c) { return convolution_cost(c, c.outputs[0]); },
      .summary = "Conv2D + BiasAdd (+ Relu) in one oneDNN call; formed by fuse_conv_bias_relu.",
      .no_gradient = "it is formed after differentiation (fuse_conv_bias_relu); build with Conv2D, BiasAdd, Relu"});
  kernels.add("FusedConv2D", graph::DeviceKind::cpu,
              {.fn = fused_conv2d_kernel, .expensive = true, .prepare = prepare_fused_conv_kernel});
  register_conv_backprop("Conv2DBackpropInput", conv2d_backprop_input_kernel, 0, schemas, kernels);
  register_conv_backprop("Conv2DBackpropFilter", conv2d_backprop_filter_kernel, 1, schemas, kernels);
}

graph::ValueRef conv2d(graph::Builder& b, graph::ValueRef input, graph::ValueRef filter, const Conv2DOptions& options) {
  return b.add_value({.op = "Conv2D",
                      .inputs = {input, filter},
                      .attrs = {{"strides", options.strides},
                                {"padding", options.padding},
                                {"explicit_paddings", options.explicit_paddings},
                                {"dilations", options.dilations},
                                {"data_format", options.data_format}}});
}

}  // namespace mirra::ops
