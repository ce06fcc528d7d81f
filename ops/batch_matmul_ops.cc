// BatchMatMulV2: schema, builder, gradient and CPU kernel. Each output matrix is one gemm on the
// operands' matrices that NumPy broadcasting of the batch dims pairs with it; the products run in
// parallel over oneTBB (a large one also split inside, as MatMul's). 16-bit operands are multiplied
// in f32 (exact widening) and the result rounded once, as MatMul's on machines without 16-bit
// kernels.
#include "ops/cpu/blas.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/widened_16_bit.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/matmul_ops.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

Expected<std::vector<TensorType>> infer_batch_matmul(const InferContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const DType output, product_output_dtype(ctx, 2));
  const Shape& x = ctx.input(0).shape;
  const Shape& y = ctx.input(1).shape;
  if (x.rank() < 2 || y.rank() < 2) return ctx.error("operands must have rank 2 or more");
  const bool adj_x = ctx.attr<bool>("adj_x"), adj_y = ctx.attr<bool>("adj_y");
  const int64_t m = x.dim(x.rank() - (adj_x ? 1 : 2)), k = x.dim(x.rank() - (adj_x ? 2 : 1));
  const int64_t ky = y.dim(y.rank() - (adj_y ? 1 : 2)), n = y.dim(y.rank() - (adj_y ? 2 : 1));
  if (k >= 0 && ky >= 0 && k != ky) return ctx.error("inner dimensions differ");
  const Shape x_batch{std::vector<int64_t>(x.dims.begin(), x.dims.end() - 2)};
  const Shape y_batch{std::vector<int64_t>(y.dims.begin(), y.dims.end() - 2)};
  std::optional<Shape> batch = broadcast_shapes(x_batch, y_batch);
  if (!batch) return ctx.error("batch dimensions do not broadcast");
  batch->dims.push_back(m);
  batch->dims.push_back(n);
  if (batch->rank() > runtime::kMaxRank) return ctx.error("the output's rank exceeds " + std::to_string(runtime::kMaxRank));
  return std::vector<TensorType>{{output, *batch}};
}

template <class T>
void batched_gemm(const BatchMatMulGeometry& g, const T* x, const T* y, T* out,
                  const std::shared_ptr<runtime::Allocator>& scratch) {
  const int64_t x_size = g.m * g.k, y_size = g.k * g.n, out_size = g.m * g.n;
  cpu::parallel_for(g.batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      cpu::gemm<T>(g.adj_x, g.adj_y, g.m, g.n, g.k, x + g.x_batch[static_cast<size_t>(i)] * x_size,
                   y + g.y_batch[static_cast<size_t>(i)] * y_size, out + i * out_size, scratch);
    }
  });
}

Status batch_matmul_kernel(KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const BatchMatMulGeometry g, batch_matmul_geometry(ctx));
  const DType out = ctx.attr<bool>("f32_output") ? DType::f32 : ctx.input(0).dtype();
  Tensor& output = ctx.allocate_output(0, out, g.output);
  const runtime::Device& device = ctx.device();
  if (graph::is_floating(out) && graph::dtype_size(ctx.input(0).dtype()) == 2) {
    const Tensor x = cpu::as_f32(ctx.input(0), device), y = cpu::as_f32(ctx.input(1), device);
    Tensor wide = out == DType::f32 ? output : Tensor::empty(device.allocator(), DType::f32, g.output);
    batched_gemm<float>(g, x.data<float>(), y.data<float>(), wide.mutable_data<float>(), device.allocator());
    if (out != DType::f32) cpu::round_into(wide, output);
    return Status();
  }
  return cpu::visit_dtype<float, double>(out, [&]<class T>(cpu::Type<T>) {
    batched_gemm<T>(g, ctx.input(0).data<T>(), ctx.input(1).data<T>(), output.mutable_data<T>(), device.allocator());
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// A product's gradient for one operand, summed over the batch dims that operand was broadcast along.
ValueRef summed_to_operand(GradientContext& g, ValueRef grad, size_t operand) {
  const Shape& input = g.input_types[operand].shape;
  const Shape& output = g.builder.type(grad).shape;
  if (input.is_fully_defined() && input == output) return grad;
  return sum_to_shape(g.builder, grad, g.input(operand));
}

// As MatMul's, per matrix: dx and dy by the four adjoint cases.
Grads batch_matmul_grad(GradientContext& g) {
  Builder& b = g.builder;
  if (g.attr<bool>("f32_output")) {
    b.fail(graph::unimplemented("BatchMatMulV2 with f32_output has no gradient: mixed precision rewrites the graph after "
                                "differentiation"));
    return Grads(2);
  }
  const ValueRef x = g.input(0), y = g.input(1), dz = g.grad(0);
  const bool ax = g.attr<bool>("adj_x"), ay = g.attr<bool>("adj_y");
  Grads grads(2);
  if (g.needs(0)) {
    const ValueRef dx = ax ? (ay ? batch_matmul(b, y, dz, true, true) : batch_matmul(b, y, dz, false, true))
                           : (ay ? batch_matmul(b, dz, y, false, false) : batch_matmul(b, dz, y, false, true));
    grads[0] = summed_to_operand(g, dx, 0);
  }
  if (g.needs(1)) {
    const ValueRef dy = ay ? (ax ? batch_matmul(b, dz, x, true, true) : batch_matmul(b, dz, x, true, false))
                           : (ax ? batch_matmul(b, x, dz, false, false) : batch_matmul(b, x, dz, true, false));
    grads[1] = summed_to_operand(g, dy, 1);
  }
  return grads;
}

}  // namespace

void register_batch_matmul_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "BatchMatMulV2",
      .inputs = {"x", "y"},
      .attrs = {{"adj_x", AttrType::boolean, false}, {"adj_y", AttrType::boolean, false}, {"f32_output", AttrType::boolean, false}},
      .product_operands = 2,
      .infer = infer_batch_matmul,
      // Each output sums the shared dim of its matrices: x's last (its second last when adjoint).
      .cost = [](const graph::CostContext& c) {
        const graph::Shape& x = c.inputs[0].shape;
        const bool* adjoint = c.node.attrs.get<bool>("adj_x");
        const double shared = static_cast<double>(std::max<int64_t>(x.dim(x.rank() - (adjoint != nullptr && *adjoint ? 2 : 1)), 0));
        return graph::product_cost(c, graph::CostContext::elements(c.outputs[0]) * shared);
      },
      .summary = "Matrix products over the last two dims, the batch dims broadcast (16-bit operands sum in f32).",
      .gradient = batch_matmul_grad});
  kernels.add("BatchMatMulV2", graph::DeviceKind::cpu, {.fn = batch_matmul_kernel, .expensive = true});
}

ValueRef batch_matmul(Builder& b, ValueRef x, ValueRef y, bool adj_x, bool adj_y) {
  return b.add_value({.op = "BatchMatMulV2", .inputs = {x, y}, .attrs = {{"adj_x", adj_x}, {"adj_y", adj_y}}});
}

}  // namespace mirra::ops
