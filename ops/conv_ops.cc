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
      .summary = "2-D convolution with an HWIO filter."});
  kernels.add("Conv2D", graph::DeviceKind::cpu, {conv2d_kernel, /*expensive=*/true});
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
