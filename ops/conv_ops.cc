// Conv2D, FusedConv2D (with bias and ReLU) and Conv2D's two backprop ops: schemas, builders and CPU
// kernels (cached oneDNN convolution primitives; NHWC/NCHW data, HWIO filters reordered to oneDNN's
// preferred layout).
#include "ops/conv_ops.h"

#include "ops/cpu/dnnl_engine.h"
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

// A convolution problem as oneDNN sees it: geometry, and the memory descriptors of input (src), filter
// (weights) and output or dy (dst) in mirra's plain layouts. Primitives let oneDNN choose the filter
// layout (its blocked layouts run 1.5-2x faster than HWIO); data stays NHWC or NCHW.
struct ConvProblem {
  cpu::WindowGeometry g;
  int64_t out_channels = 0;
  dnnl::memory::desc src_md, weights_md, dst_md;

  static ConvProblem make(KernelContext& ctx, const Tensor& input, const Tensor& filter) {
    const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
    ConvProblem c{cpu::WindowGeometry::make(input, nchw, filter.dim(0), filter.dim(1),
                                            ctx.attr<std::vector<int64_t>>("strides"),
                                            ctx.attr<std::vector<int64_t>>("dilations"),
                                            ctx.attr<std::string>("padding") == "SAME"),
                  filter.dim(3), {}, {}, {}};
    using dnnl::memory;
    c.src_md = memory::desc({c.g.batch, c.g.channels, c.g.height, c.g.width}, memory::data_type::f32, c.g.layout);
    c.weights_md = memory::desc({c.out_channels, c.g.channels, filter.dim(0), filter.dim(1)}, memory::data_type::f32,
                                memory::format_tag::hwio);
    c.dst_md = memory::desc({c.g.batch, c.out_channels, c.g.out_height, c.g.out_width}, memory::data_type::f32, c.g.layout);
    return c;
  }

  // Identifies the primitive for `direction` (forward, backward data or weights).
  std::string key(const char* direction) const {
    const auto& w = weights_md.dims();
    return cpu::dnnl_key(direction, {static_cast<int64_t>(g.layout), g.batch, g.channels, g.height, g.width, out_channels,
                                     w[2], w[3], g.strides[0], g.strides[1], g.dilations[0], g.dilations[1],
                                     g.pad_before[0], g.pad_before[1], g.pad_after[0], g.pad_after[1]});
  }

  // The same problem with the filter layout left to oneDNN.
  dnnl::memory::desc any_weights() const {
    return dnnl::memory::desc(weights_md.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
  }

  dnnl::convolution_forward::primitive_desc forward_pd(dnnl::prop_kind kind, const dnnl::primitive_attr& attr) const {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(kind, dnnl::algorithm::convolution_direct, src_md, any_weights(), dst_md,
                                        g.strides, g.dilations, g.pad_before, g.pad_after),
        attr, cpu::dnnl_engine());
  }
};

// True (and the output zero-filled) when there is nothing for oneDNN to compute.
bool zero_sized(const Tensor& input, const Tensor& filter, const Tensor& dy, Tensor& out) {
  if (out.num_elements() > 0 && input.num_elements() > 0 && filter.num_elements() > 0 && dy.num_elements() > 0) return false;
  if (out.byte_size() > 0) std::fill_n(out.mutable_data<float>(), out.num_elements(), 0.0f);
  return true;
}

dnnl::memory plain(const dnnl::memory::desc& desc, const Tensor& tensor) {
  return dnnl::memory(desc, cpu::dnnl_engine(), const_cast<void*>(tensor.raw_data()));
}

// Conv2D, or FusedConv2D with a bias (input 2) and optionally a ReLU applied by oneDNN as it writes
// the output (post-ops), which saves the two passes over it that BiasAdd and Relu would make.
Status conv2d_forward(KernelContext& ctx, const Tensor* bias, bool relu) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  MIRRA_RETURN_IF_ERROR(check_conv_operands(ctx, input, filter, bias));
  const ConvProblem c = ConvProblem::make(ctx, input, filter);
  Tensor& output = ctx.allocate_output(0, DType::f32, c.g.output_shape(nchw, c.out_channels));
  if (output.num_elements() == 0) return Status();
  if (input.num_elements() == 0 || filter.num_elements() == 0) {  // no input channels: the bias alone
    float* out = output.mutable_data<float>();
    for (int64_t i = 0; i < output.num_elements(); ++i) {
      const int64_t channel = nchw ? i / (c.g.out_height * c.g.out_width) % c.out_channels : i % c.out_channels;
      const float value = bias != nullptr ? bias->data<float>()[channel] : 0.0f;
      out[i] = relu ? std::max(value, 0.0f) : value;
    }
    return Status();
  }
  using dnnl::memory;
  const memory::desc bias_md({c.out_channels}, memory::data_type::f32, memory::format_tag::x);
  const std::string kind = bias == nullptr ? "conv2d/forward" : relu ? "conv2d/forward_bias_relu" : "conv2d/forward_bias";
  MIRRA_ASSIGN_OR_RETURN(const cpu::DnnlPrimitive* primitive, cpu::cached_dnnl_primitive(c.key(kind.c_str()), [&] {
    dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
    if (relu) {
      dnnl::post_ops post_ops;
      post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(post_ops);
    }
    const auto pd =
        bias == nullptr
            ? c.forward_pd(dnnl::prop_kind::forward_inference, attr)
            : dnnl::convolution_forward::primitive_desc(
                  dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                  dnnl::algorithm::convolution_direct, c.src_md, c.any_weights(),
                                                  bias_md, c.dst_md, c.g.strides, c.g.dilations, c.g.pad_before,
                                                  c.g.pad_after),
                  attr, cpu::dnnl_engine());
    cpu::DnnlPrimitive p{dnnl::convolution_forward(pd), pd.scratchpad_desc(), {}};
    p.relayout(DNNL_ARG_WEIGHTS, c.weights_md, pd.weights_desc(), /*output=*/false);
    return p;
  }));
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, plain(c.src_md, input)},
                                                {DNNL_ARG_WEIGHTS, plain(c.weights_md, filter)},
                                                {DNNL_ARG_DST, plain(c.dst_md, output)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, plain(bias_md, *bias));
  return cpu::dnnl_execute(*primitive, std::move(args), ctx.device());
}

Status conv2d_kernel(KernelContext& ctx) { return conv2d_forward(ctx, nullptr, false); }

Status fused_conv2d_kernel(KernelContext& ctx) {
  return conv2d_forward(ctx, &ctx.input(2), ctx.attr<std::string>("activation") == "relu");
}

// d loss / d input of Conv2D: inputs (input, filter, dy); `input` gives the shape.
Status conv2d_backprop_input_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  Tensor& dx = ctx.allocate_output(0, DType::f32, input.shape());
  if (zero_sized(input, filter, dy, dx)) return Status();
  const ConvProblem c = ConvProblem::make(ctx, input, filter);
  MIRRA_ASSIGN_OR_RETURN(const cpu::DnnlPrimitive* primitive, cpu::cached_dnnl_primitive(c.key("conv2d/backward_data"), [&] {
    const dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
    const dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, c.src_md, c.any_weights(), c.dst_md,
                                              c.g.strides, c.g.dilations, c.g.pad_before, c.g.pad_after),
        attr, cpu::dnnl_engine(), c.forward_pd(dnnl::prop_kind::forward_training, attr));
    cpu::DnnlPrimitive p{dnnl::convolution_backward_data(pd), pd.scratchpad_desc(), {}};
    p.relayout(DNNL_ARG_WEIGHTS, c.weights_md, pd.weights_desc(), /*output=*/false);
    return p;
  }));
  return cpu::dnnl_execute(*primitive, {{DNNL_ARG_DIFF_DST, plain(c.dst_md, dy)},
                                        {DNNL_ARG_WEIGHTS, plain(c.weights_md, filter)},
                                        {DNNL_ARG_DIFF_SRC, plain(c.src_md, dx)}}, ctx.device());
}

// d loss / d filter of Conv2D: inputs (input, filter, dy); `filter` gives the shape.
Status conv2d_backprop_filter_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  Tensor& dw = ctx.allocate_output(0, DType::f32, filter.shape());
  if (zero_sized(input, filter, dy, dw)) return Status();
  const ConvProblem c = ConvProblem::make(ctx, input, filter);
  MIRRA_ASSIGN_OR_RETURN(const cpu::DnnlPrimitive* primitive, cpu::cached_dnnl_primitive(c.key("conv2d/backward_weights"), [&] {
    const dnnl::primitive_attr attr = cpu::dnnl_user_scratchpad();
    const dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, c.src_md, c.any_weights(),
                                                 c.dst_md, c.g.strides, c.g.dilations, c.g.pad_before, c.g.pad_after),
        attr, cpu::dnnl_engine(), c.forward_pd(dnnl::prop_kind::forward_training, attr));
    cpu::DnnlPrimitive p{dnnl::convolution_backward_weights(pd), pd.scratchpad_desc(), {}};
    p.relayout(DNNL_ARG_DIFF_WEIGHTS, c.weights_md, pd.diff_weights_desc(), /*output=*/true);
    return p;
  }));
  return cpu::dnnl_execute(*primitive, {{DNNL_ARG_SRC, plain(c.src_md, input)},
                                        {DNNL_ARG_DIFF_DST, plain(c.dst_md, dy)},
                                        {DNNL_ARG_DIFF_WEIGHTS, plain(c.weights_md, dw)}}, ctx.device());
}

std::vector<graph::ValueRef> conv2d_grad(graph::GradientContext& g) {
  auto& b = g.builder;
  const graph::AttrMap attrs = copy_attrs(g.node, {"strides", "padding", "dilations", "data_format"});
  std::vector<graph::ValueRef> grads(2);
  for (size_t i : {0u, 1u}) {
    if (!g.needs(i)) continue;
    grads[i] = b.add_value({.op = i == 0 ? "Conv2DBackpropInput" : "Conv2DBackpropFilter",
                            .inputs = {g.input(0), g.input(1), g.grad(0)},
                            .attrs = attrs});
  }
  return grads;
}

void register_conv_backprop(const char* name, runtime::KernelFn kernel, size_t shape_from, graph::OpRegistry& schemas,
                            runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = name,
      .inputs = {"input", "filter", "dy"},
      .attrs = {{"strides", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"padding", AttrType::string, std::string("SAME")},
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")}},
      .infer = [shape_from](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32}));
        MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
        for (size_t i = 0; i < 3; ++i) MIRRA_RETURN_IF_ERROR(require_rank(ctx, i, 4));
        MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
        MIRRA_RETURN_IF_ERROR(check_pair(ctx, "dilations"));
        MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
        return std::vector<TensorType>{ctx.input(shape_from)};
      },
      .summary = "A gradient of Conv2D, given its input, filter and the gradient of its output.",
      .no_gradient = "second derivatives of Conv2D are not supported"});
  kernels.add(name, graph::DeviceKind::cpu, {kernel, /*expensive=*/true});
}

Expected<std::vector<TensorType>> infer_conv2d(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32}));
  MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 4));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "dilations"));
  MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
  const Shape& filter = ctx.input(1).shape;
  if (!filter.is_fully_defined()) return ctx.error("filter shape must be fully defined");
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const int64_t channels = ctx.input(0).shape.dim(nchw ? 1 : 3);
  if (channels >= 0 && channels != filter.dim(2)) return ctx.error("filter's input channels differ from the input's");
  if (filter.dim(0) < 1 || filter.dim(1) < 1) return ctx.error("filter window must be at least 1x1");
  MIRRA_RETURN_IF_ERROR(check_window_extent(ctx, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations")));
  return std::vector<TensorType>{{DType::f32, window_output_shape(ctx, filter.dim(0), filter.dim(1),
                                                                   ctx.attr<std::vector<int64_t>>("dilations"),
                                                                   filter.dim(3))}};
}

Expected<std::vector<TensorType>> infer_fused_conv2d(const InferContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(std::vector<TensorType> output, infer_conv2d(ctx));
  const Shape& bias = ctx.input(2).shape;
  if (bias.rank() != 1 || bias.dim(0) != ctx.input(1).shape.dim(3)) {
    return ctx.error("bias must be a vector of the filter's output channels");
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
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")}},
      .infer = infer_conv2d,
      .summary = "2-D convolution with an HWIO filter.",
      .gradient = conv2d_grad});
  kernels.add("Conv2D", graph::DeviceKind::cpu, {conv2d_kernel, /*expensive=*/true});
  schemas.add(graph::OpSchema{
      .name = "FusedConv2D",
      .inputs = {"input", "filter", "bias"},
      .attrs = {{"strides", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"padding", AttrType::string, std::string("SAME")},
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")},
                {"activation", AttrType::string, std::string("relu")}},
      .infer = infer_fused_conv2d,
      .summary = "Conv2D + BiasAdd (+ Relu) in one oneDNN call; formed by fuse_conv_bias_relu.",
      .no_gradient = "it is formed after differentiation (fuse_conv_bias_relu); build with Conv2D, BiasAdd, Relu"});
  kernels.add("FusedConv2D", graph::DeviceKind::cpu, {fused_conv2d_kernel, /*expensive=*/true});
  register_conv_backprop("Conv2DBackpropInput", conv2d_backprop_input_kernel, 0, schemas, kernels);
  register_conv_backprop("Conv2DBackpropFilter", conv2d_backprop_filter_kernel, 1, schemas, kernels);
}

graph::ValueRef conv2d(graph::Builder& b, graph::ValueRef input, graph::ValueRef filter, const Conv2DOptions& options) {
  return b.add_value({.op = "Conv2D",
                      .inputs = {input, filter},
                      .attrs = {{"strides", options.strides},
                                {"padding", options.padding},
                                {"dilations", options.dilations},
                                {"data_format", options.data_format}}});
}

}  // namespace mirra::ops
