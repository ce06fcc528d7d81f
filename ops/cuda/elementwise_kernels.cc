// GPU kernels of the element-wise ops (SelectV2 and Range too), host side: shapes, broadcasting
// geometry, output allocation; CheckNumerics, which waits for the device's count without blocking.
#include "ops/cpu/broadcast.h"
#include "ops/cuda/gpu_kernel.h"
#include "ops/elementwise_math.h"
#include "ops/kernel_shapes.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

template <UnaryOp kOp>
Status unary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return launched(unary(kOp, x.dtype(), x.raw_data(), y.mutable_raw_data(), x.num_elements(), stream_of(ctx)), "unary");
}

Status gelu_kernel(KernelContext& ctx) {
  return ctx.attr<bool>("approximate") ? unary_kernel<UnaryOp::gelu_tanh>(ctx) : unary_kernel<UnaryOp::gelu>(ctx);
}

Status gelu_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (!(dy.shape() == x.shape())) return graph::invalid_argument("dy " + dy.type_string() + " and x " + x.type_string() + " differ");
  Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.shape());
  return launched(gelu_grad(dy.dtype(), ctx.attr<bool>("approximate"), dy.raw_data(), x.raw_data(), dx.mutable_raw_data(),
                            dy.num_elements(), stream_of(ctx)),
                  "gelu_grad");
}

Status leaky_relu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  const double alpha = math::leaky_relu_alpha(ctx.attr<double>("alpha"));
  return launched(leaky_relu(x.dtype(), alpha, x.raw_data(), y.mutable_raw_data(), x.num_elements(), stream_of(ctx)), "leaky_relu");
}

Status logical_not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return launched(logical_not(x.data<bool>(), y.mutable_data<bool>(), x.num_elements(), stream_of(ctx)), "logical_not");
}

Status relu_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& y = ctx.input(1);
  if (!(dy.shape() == y.shape())) return graph::invalid_argument("dy " + dy.type_string() + " and y " + y.type_string() + " differ");
  Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.shape());
  return launched(relu_grad(dy.dtype(), dy.raw_data(), y.raw_data(), dx.mutable_raw_data(), dy.num_elements(), stream_of(ctx)),
                  "relu_grad");
}

// The strides of x and y over the broadcast output's dims (0 where broadcast).
BroadcastGeometry broadcast_geometry(const TensorShape& x, const TensorShape& y, const TensorShape& out) {
  BroadcastGeometry g;
  g.rank = out.rank();
  g.elements = out.num_elements();
  for (int d = 0; d < g.rank; ++d) g.dims[d] = out.dim(d);
  cpu::broadcast_strides(x, out, g.x_strides);
  cpu::broadcast_strides(y, out, g.y_strides);
  return g;
}

template <BinaryOp kOp>
Status binary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  const auto shape = cpu::broadcast_shape(x.shape(), y.shape());
  if (!shape) {
    return graph::invalid_argument("shapes " + x.shape().to_string() + " and " + y.shape().to_string() + " do not broadcast");
  }
  Tensor& out = ctx.allocate_output(0, has_bool_output(kOp) ? DType::boolean : x.dtype(), *shape);
  return launched(binary(kOp, x.dtype(), x.raw_data(), y.raw_data(), out.mutable_raw_data(),
                         broadcast_geometry(x.shape(), y.shape(), *shape), stream_of(ctx)),
                  "binary");
}

Status select_kernel(KernelContext& ctx) {
  const Tensor& condition = ctx.input(0);
  const Tensor& then_value = ctx.input(1);
  const Tensor& else_value = ctx.input(2);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape shape, select_shape(condition, then_value, else_value));
  Tensor& out = ctx.allocate_output(0, then_value.dtype(), shape);
  SelectGeometry g;
  g.values = broadcast_geometry(then_value.shape(), else_value.shape(), shape);
  cpu::broadcast_strides(condition.shape(), shape, g.condition_strides);
  return launched(select(graph::dtype_size(out.dtype()), condition.data<bool>(), then_value.raw_data(), else_value.raw_data(),
                         out.mutable_raw_data(), g, stream_of(ctx)),
                  "select");
}

Status range_kernel(KernelContext& ctx) {
  const DType dtype = ctx.attr<DType>("dtype");
  const double start = ctx.attr<double>("start"), delta = ctx.attr<double>("delta");
  MIRRA_ASSIGN_OR_RETURN(const int64_t n, range_size(dtype, start, ctx.attr<double>("limit"), delta));
  Tensor& y = ctx.allocate_output(0, dtype, TensorShape({n}));
  return launched(range(dtype, start, delta, y.mutable_raw_data(), n, stream_of(ctx)), "range");
}

Status bias_add_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const BiasGeometry g, bias_geometry(ctx, x, bias));
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return launched(bias_add(x.dtype(), x.raw_data(), bias.raw_data(), y.mutable_raw_data(), x.num_elements(), g.channels,
                           std::max<int64_t>(g.inner, 1), stream_of(ctx)),
                  "bias_add");
}

Status cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, ctx.attr<DType>("dtype"), x.shape());
  return launched(cast(x.dtype(), y.dtype(), x.raw_data(), y.mutable_raw_data(), x.num_elements(), stream_of(ctx)), "cast");
}

Status fill_kernel(KernelContext& ctx) {
  Tensor& y = ctx.allocate_output(0, ctx.attr<DType>("dtype"), TensorShape(ctx.attr<graph::Shape>("shape").dims));
  return launched(fill(y.dtype(), ctx.attr<double>("value"), y.mutable_raw_data(), y.num_elements(), stream_of(ctx)), "fill");
}

Status zeros_like_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  if (y.byte_size() == 0) return Status();
  // All-zero bytes are 0 in every dtype.
  MIRRA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y.mutable_raw_data(), 0, y.byte_size(), stream_of(ctx)));
  return Status();
}

// Asynchronous: the counts of non-finite values come back to pinned host memory, and the node is
// done (or fails naming its message, as on the CPU) once the device has counted.
void check_numerics_kernel(KernelContext& ctx, runtime::KernelDone done) {
  const Tensor& x = ctx.input(0);
  const runtime::cuda::GpuDevice& gpu = gpu_of(ctx);
  Tensor counts = Tensor::empty(gpu.allocator(), DType::i64, TensorShape{2});
  Tensor on_host = Tensor::empty(gpu.host_memory_allocator(), DType::i64, TensorShape{2});
  auto* device_counts = static_cast<unsigned long long*>(counts.mutable_raw_data());
  // Launched as the compute stream's work (at once, on this thread, with the GPU current); the copy
  // back writes the pinned host buffer, which a device kernel may touch only when it says so.
  const runtime::MemorySpace space = gpu.memory_space();
  Status launch;
  gpu.gpu_stream().enqueue([&] {
    const runtime::ScopedMemoryAccess host_too(space, /*host_too=*/true);
    launch = runtime::cuda::check(cudaMemsetAsync(device_counts, 0, counts.byte_size(), gpu.stream()), "cudaMemsetAsync");
    if (launch.ok()) launch = launched(count_non_finite(x.dtype(), x.raw_data(), x.num_elements(), device_counts, gpu.stream()),
                                       "count_non_finite");
    if (launch.ok()) {
      launch = runtime::cuda::check(
          cudaMemcpyAsync(on_host.mutable_raw_data(), device_counts, counts.byte_size(), cudaMemcpyDeviceToHost, gpu.stream()),
          "cudaMemcpyAsync");
    }
  });
  if (!launch.ok()) return done(launch);
  ctx.set_output(0, x);
  gpu.gpu_stream().when_device_done([counts = std::move(counts), on_host = std::move(on_host), done = std::move(done),
                                     message = ctx.attr<std::string>("message"), type = x.type_string()](Status status) {
    if (!status.ok()) return done(std::move(status));
    const int64_t* found = on_host.data<int64_t>();
    if (found[0] + found[1] == 0) return done(Status());
    done(graph::invalid_argument(message + ": " + type + " holds " + std::to_string(found[0]) + " NaN and " +
                                 std::to_string(found[1]) + " infinite values"));
  });
}

}  // namespace

void register_gpu_elementwise_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64});
  const auto add_for_floats = [&](const char* op, runtime::KernelFn fn) { kernels.add(op, DeviceKind::gpu, {.fn = fn, .dtypes = floats}); };
  add_for_floats("Neg", unary_kernel<UnaryOp::neg>);
  add_for_floats("Exp", unary_kernel<UnaryOp::exp>);
  add_for_floats("Log", unary_kernel<UnaryOp::log>);
  add_for_floats("Sqrt", unary_kernel<UnaryOp::sqrt>);
  add_for_floats("Rsqrt", unary_kernel<UnaryOp::rsqrt>);
  add_for_floats("Square", unary_kernel<UnaryOp::square>);
  add_for_floats("Relu", unary_kernel<UnaryOp::relu>);
  add_for_floats("Sigmoid", unary_kernel<UnaryOp::sigmoid>);
  add_for_floats("Tanh", unary_kernel<UnaryOp::tanh>);
  add_for_floats("Abs", unary_kernel<UnaryOp::abs>);
  add_for_floats("Sign", unary_kernel<UnaryOp::sign>);
  add_for_floats("Erf", unary_kernel<UnaryOp::erf>);
  add_for_floats("Softplus", unary_kernel<UnaryOp::softplus>);
  add_for_floats("Gelu", gelu_kernel);
  add_for_floats("GeluGrad", gelu_grad_kernel);
  add_for_floats("LeakyRelu", leaky_relu_kernel);
  kernels.add("LogicalNot", DeviceKind::gpu, {logical_not_kernel});
  add_for_floats("ReluGrad", relu_grad_kernel);
  add_for_floats("BiasAdd", bias_add_kernel);
  kernels.add("Add", DeviceKind::gpu, {binary_kernel<BinaryOp::add>});
  kernels.add("Sub", DeviceKind::gpu, {binary_kernel<BinaryOp::sub>});
  kernels.add("Mul", DeviceKind::gpu, {binary_kernel<BinaryOp::mul>});
  // Integer division by zero is an error on the CPU; the device cannot report one, so integer Div
  // stays on the CPU (soft placement moves it there).
  add_for_floats("Div", binary_kernel<BinaryOp::div>);
  kernels.add("Maximum", DeviceKind::gpu, {binary_kernel<BinaryOp::maximum>});
  kernels.add("Minimum", DeviceKind::gpu, {binary_kernel<BinaryOp::minimum>});
  add_for_floats("Pow", binary_kernel<BinaryOp::pow>);
  // A comparison's output is bool; a dtype constraint (of output 0) would refuse it, so they take any.
  kernels.add("Equal", DeviceKind::gpu, {binary_kernel<BinaryOp::equal>});
  kernels.add("NotEqual", DeviceKind::gpu, {binary_kernel<BinaryOp::not_equal>});
  kernels.add("Less", DeviceKind::gpu, {binary_kernel<BinaryOp::less>});
  kernels.add("LessEqual", DeviceKind::gpu, {binary_kernel<BinaryOp::less_equal>});
  kernels.add("Greater", DeviceKind::gpu, {binary_kernel<BinaryOp::greater>});
  kernels.add("GreaterEqual", DeviceKind::gpu, {binary_kernel<BinaryOp::greater_equal>});
  kernels.add("LogicalAnd", DeviceKind::gpu, {binary_kernel<BinaryOp::logical_and>});
  kernels.add("LogicalOr", DeviceKind::gpu, {binary_kernel<BinaryOp::logical_or>});
  kernels.add("SelectV2", DeviceKind::gpu, {select_kernel});
  kernels.add("CheckNumerics", DeviceKind::gpu,
              {.async_fn = check_numerics_kernel, .dtypes = floats, .not_capturable = "completes on the host, after the device ran it"});
  kernels.add("Cast", DeviceKind::gpu, {cast_kernel});
  kernels.add("Fill", DeviceKind::gpu, {fill_kernel});
  kernels.add("Range", DeviceKind::gpu, {range_kernel});
  kernels.add("ZerosLike", DeviceKind::gpu, {zeros_like_kernel});
}

}  // namespace mirra::ops::cuda
