// Conv2D: schema, builder and CPU kernel (oneDNN convolution, plain layouts: NHWC/NCHW data, HWIO filter).
#include "ops/conv_ops.h"

#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/window_geometry.h"
#include "ops/op_families.h"
#include "ops/window_attrs.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

Status conv2d_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const auto g = cpu::WindowGeometry::make(input, nchw, filter.dim(0), filter.dim(1),
                                           ctx.attr<std::vector<int64_t>>("strides"),
                                           ctx.attr<std::vector<int64_t>>("dilations"),
                                           ctx.attr<std::string>("padding") == "SAME");
  if (filter.dim(2) != g.channels) {
    return graph::invalid_argument("filter " + filter.type_string() + " does not match input channels of " +
                                   input.type_string());
  }
  const int64_t out_channels = filter.dim(3);
  Tensor& output = ctx.allocate_output(0, DType::f32, g.output_shape(nchw, out_channels));
  if (output.num_elements() == 0) return Status();
  if (input.num_elements() == 0 || filter.num_elements() == 0) {  // no input channels: all zeros
    std::fill_n(output.mutable_data<float>(), output.num_elements(), 0.0f);
    return Status();
  }
  using dnnl::memory;
  const memory::desc src_md({g.batch, g.channels, g.height, g.width}, memory::data_type::f32, g.layout);
  const memory::desc weights_md({out_channels, g.channels, filter.dim(0), filter.dim(1)}, memory::data_type::f32,
                                memory::format_tag::hwio);
  const memory::desc dst_md({g.batch, out_channels, g.out_height, g.out_width}, memory::data_type::f32, g.layout);
  try {
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                               src_md, weights_md, dst_md, g.strides, g.dilations, g.pad_before,
                                               g.pad_after);
    const dnnl::convolution_forward::primitive_desc pd(desc, cpu::dnnl_engine());
    auto& engine = cpu::dnnl_engine();
    return cpu::dnnl_execute(dnnl::convolution_forward(pd),
                             {{DNNL_ARG_SRC, memory(src_md, engine, const_cast<void*>(input.raw_data()))},
                              {DNNL_ARG_WEIGHTS, memory(weights_md, engine, const_cast<void*>(filter.raw_data()))},
                              {DNNL_ARG_DST, memory(dst_md, engine, output.mutable_raw_data())}});
  } catch (const dnnl::error& e) {
    return graph::internal_error(std::string("oneDNN convolution: ") + e.what());
  }
}

// The oneDNN descriptions shared by the two backward kernels: geometry and memory descriptors of
// input (src), filter (weights) and dy (dst), plus the forward primitive they hint from.
struct ConvBackward {
  cpu::WindowGeometry g;
  dnnl::memory::desc src_md, weights_md, dst_md;
  dnnl::convolution_forward::primitive_desc forward;

  static ConvBackward make(KernelContext& ctx, const Tensor& input, const Tensor& filter) {
    const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
    ConvBackward c{cpu::WindowGeometry::make(input, nchw, filter.dim(0), filter.dim(1),
                                             ctx.attr<std::vector<int64_t>>("strides"),
                                             ctx.attr<std::vector<int64_t>>("dilations"),
                                             ctx.attr<std::string>("padding") == "SAME"),
                   {}, {}, {}, {}};
    using dnnl::memory;
    const int64_t out_channels = filter.dim(3);
    c.src_md = memory::desc({c.g.batch, c.g.channels, c.g.height, c.g.width}, memory::data_type::f32, c.g.layout);
    c.weights_md = memory::desc({out_channels, c.g.channels, filter.dim(0), filter.dim(1)}, memory::data_type::f32,
                                memory::format_tag::hwio);
    c.dst_md = memory::desc({c.g.batch, out_channels, c.g.out_height, c.g.out_width}, memory::data_type::f32, c.g.layout);
    c.forward = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, c.src_md,
                                        c.weights_md, c.dst_md, c.g.strides, c.g.dilations, c.g.pad_before, c.g.pad_after),
        cpu::dnnl_engine());
    return c;
  }
};

// True (and the output zero-filled) when there is nothing for oneDNN to compute.
bool zero_sized(const Tensor& input, const Tensor& filter, const Tensor& dy, Tensor& out) {
  if (out.num_elements() > 0 && input.num_elements() > 0 && filter.num_elements() > 0 && dy.num_elements() > 0) return false;
  if (out.byte_size() > 0) std::fill_n(out.mutable_data<float>(), out.num_elements(), 0.0f);
  return true;
}

// d loss / d input of Conv2D: inputs (input, filter, dy); `input` gives the shape.
Status conv2d_backprop_input_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  Tensor& dx = ctx.allocate_output(0, DType::f32, input.shape());
  if (zero_sized(input, filter, dy, dx)) return Status();
  try {
    const ConvBackward c = ConvBackward::make(ctx, input, filter);
    const dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, c.src_md, c.weights_md, c.dst_md,
                                              c.g.strides, c.g.dilations, c.g.pad_before, c.g.pad_after),
        cpu::dnnl_engine(), c.forward);
    auto& engine = cpu::dnnl_engine();
    using dnnl::memory;
    return cpu::dnnl_execute(dnnl::convolution_backward_data(pd),
                             {{DNNL_ARG_DIFF_DST, memory(c.dst_md, engine, const_cast<void*>(dy.raw_data()))},
                              {DNNL_ARG_WEIGHTS, memory(c.weights_md, engine, const_cast<void*>(filter.raw_data()))},
                              {DNNL_ARG_DIFF_SRC, memory(c.src_md, engine, dx.mutable_raw_data())}});
  } catch (const dnnl::error& e) {
    return graph::internal_error(std::string("oneDNN convolution backward data: ") + e.what());
  }
}

// d loss / d filter of Conv2D: inputs (input, filter, dy); `filter` gives the shape.
Status conv2d_backprop_filter_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  Tensor& dw = ctx.allocate_output(0, DType::f32, filter.shape());
  if (zero_sized(input, filter, dy, dw)) return Status();
  try {
    const ConvBackward c = ConvBackward::make(ctx, input, filter);
    const dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, c.src_md, c.weights_md, c.dst_md,
                                                 c.g.strides, c.g.dilations, c.g.pad_before, c.g.pad_after),
        cpu::dnnl_engine(), c.forward);
    auto& engine = cpu::dnnl_engine();
    using dnnl::memory;
    return cpu::dnnl_execute(dnnl::convolution_backward_weights(pd),
                             {{DNNL_ARG_SRC, memory(c.src_md, engine, const_cast<void*>(input.raw_data()))},
                              {DNNL_ARG_DIFF_DST, memory(c.dst_md, engine, const_cast<void*>(dy.raw_data()))},
                              {DNNL_ARG_DIFF_WEIGHTS, memory(c.weights_md, engine, dw.mutable_raw_data())}});
  } catch (const dnnl::error& e) {
    return graph::internal_error(std::string("oneDNN convolution backward weights: ") + e.what());
  }
}

std::vector<graph::ValueRef> conv2d_grad(graph::GradientContext& g) {
  auto& b = g.builder;
  const graph::AttrMap attrs = copy_attrs(g.node, {"strides", "padding", "dilations", "data_format"});
  return {b.add_value({.op = "Conv2DBackpropInput", .inputs = {g.input(0), g.input(1), g.grad(0)}, .attrs = attrs}),
          b.add_value({.op = "Conv2DBackpropFilter", .inputs = {g.input(0), g.input(1), g.grad(0)}, .attrs = attrs})};
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

}  // namespace

void register_conv_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "Conv2D",
      .inputs = {"input", "filter"},
      .attrs = {{"strides", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"padding", AttrType::string, std::string("SAME")},
                {"dilations", AttrType::int_list, std::vector<int64_t>{1, 1}},
                {"data_format", AttrType::string, std::string("NHWC")}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
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
        return std::vector<TensorType>{{DType::f32, window_output_shape(ctx, filter.dim(0), filter.dim(1),
                                                                         ctx.attr<std::vector<int64_t>>("dilations"),
                                                                         filter.dim(3))}};
      },
      .summary = "2-D convolution with an HWIO filter.",
      .gradient = conv2d_grad});
  kernels.add("Conv2D", graph::DeviceKind::cpu, {conv2d_kernel, /*expensive=*/true});
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
