// MaxPool and AvgPool: schemas, builders and CPU kernels (oneDNN pooling).
#include "ops/pool_ops.h"

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

template <dnnl::algorithm kAlgorithm>
Status pool_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  const auto g = cpu::WindowGeometry::make(input, nchw, ksize[0], ksize[1], ctx.attr<std::vector<int64_t>>("strides"),
                                           {1, 1}, ctx.attr<std::string>("padding") == "SAME");
  Tensor& output = ctx.allocate_output(0, DType::f32, g.output_shape(nchw, g.channels));
  if (output.num_elements() == 0) return Status();
  using dnnl::memory;
  const memory::desc src_md({g.batch, g.channels, g.height, g.width}, memory::data_type::f32, g.layout);
  const memory::desc dst_md({g.batch, g.channels, g.out_height, g.out_width}, memory::data_type::f32, g.layout);
  try {
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, kAlgorithm, src_md, dst_md, g.strides,
                                           {ksize[0], ksize[1]}, g.pad_before, g.pad_after);
    const dnnl::pooling_forward::primitive_desc pd(desc, cpu::dnnl_engine());
    auto& engine = cpu::dnnl_engine();
    return cpu::dnnl_execute(dnnl::pooling_forward(pd),
                             {{DNNL_ARG_SRC, memory(src_md, engine, const_cast<void*>(input.raw_data()))},
                              {DNNL_ARG_DST, memory(dst_md, engine, output.mutable_raw_data())}});
  } catch (const dnnl::error& e) {
    return graph::internal_error(std::string("oneDNN pooling: ") + e.what());
  }
}

Expected<std::vector<TensorType>> infer_pool(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32}));
  MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 4));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "ksize"));
  MIRRA_RETURN_IF_ERROR(check_pair(ctx, "strides"));
  MIRRA_RETURN_IF_ERROR(check_padding_and_format(ctx));
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  const int64_t channels = ctx.input(0).shape.dim(nchw ? 1 : 3);
  return std::vector<TensorType>{{DType::f32, window_output_shape(ctx, ksize[0], ksize[1], {1, 1}, channels)}};
}

void register_pool(const char* name, runtime::KernelFn kernel, graph::OpRegistry& schemas,
                   runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"input"},
                              .attrs = {{"ksize", AttrType::int_list, std::vector<int64_t>{2, 2}},
                                        {"strides", AttrType::int_list, std::vector<int64_t>{2, 2}},
                                        {"padding", AttrType::string, std::string("VALID")},
                                        {"data_format", AttrType::string, std::string("NHWC")}},
                              .infer = infer_pool,
                              .summary = "2-D pooling over ksize windows."});
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
  register_pool("MaxPool", pool_kernel<dnnl::algorithm::pooling_max>, schemas, kernels);
  register_pool("AvgPool", pool_kernel<dnnl::algorithm::pooling_avg_exclude_padding>, schemas, kernels);
}

graph::ValueRef max_pool(graph::Builder& b, graph::ValueRef input, const PoolOptions& options) {
  return pool(b, "MaxPool", input, options);
}

graph::ValueRef avg_pool(graph::Builder& b, graph::ValueRef input, const PoolOptions& options) {
  return pool(b, "AvgPool", input, options);
}

}  // namespace mirra::ops
