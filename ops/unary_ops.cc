// Unary element-wise ops: one functor each (ops/elementwise_math.h), one shared schema and kernel template;
// Gelu's attribute picks its form (f32 through oneDNN's vectorised GELU and its gradient GeluGrad),
// LeakyRelu's is its slope below zero; LogicalNot of bools.
#include <cmath>

#include "ops/array_ops.h"
#include "ops/cpu/dnnl_eltwise.h"
#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_math.h"
#include "ops/elementwise_ops.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"

namespace mirra::ops {

using runtime::KernelContext;
using runtime::Tensor;

namespace {

using math::Abs;
using math::Erf;
using math::Exp;
using math::Gelu;
using math::GeluTanh;
using math::Log;
using math::Neg;
using math::Relu;
using math::Rsqrt;
using math::Sigmoid;
using math::Sign;
using math::Softplus;
using math::Sqrt;
using math::Square;
using math::Tanh;

template <class Op>
Status unary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    T* out = y.mutable_data<T>();
    cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = Op::template apply<T>(in[i]);
    });
    return Status();
  });
}

// oneDNN's GELU of the form the node's `approximate` attribute names.
dnnl::algorithm gelu_algorithm(const KernelContext& ctx) {
  return ctx.attr<bool>("approximate") ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
}

// f32 through oneDNN's vectorised GELU; f64 through the functors.
Status gelu_kernel(KernelContext& ctx) {
  const bool approximate = ctx.attr<bool>("approximate");
  const Tensor& x = ctx.input(0);
  if (x.dtype() != graph::DType::f32) return approximate ? unary_kernel<GeluTanh>(ctx) : unary_kernel<Gelu>(ctx);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return cpu::dnnl_eltwise(ctx, gelu_algorithm(ctx), x.data<float>(), y.mutable_data<float>(), x.num_elements());
}

Status gelu_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (!(dy.shape() == x.shape())) return graph::invalid_argument("dy " + dy.type_string() + " and x " + x.type_string() + " differ");
  const bool approximate = ctx.attr<bool>("approximate");
  Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.shape());
  if (dy.dtype() == graph::DType::f32) {
    return cpu::dnnl_eltwise_gradient(ctx, gelu_algorithm(ctx), dy.data<float>(), x.data<float>(), dx.mutable_data<float>(),
                                      dy.num_elements());
  }
  return cpu::visit_dtype<double>(dy.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* g = dy.data<T>();
    const T* in = x.data<T>();
    T* d = dx.mutable_data<T>();
    cpu::parallel_for(dy.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) d[i] = approximate ? math::gelu_tanh_grad(g[i], in[i]) : math::gelu_grad(g[i], in[i]);
    });
    return Status();
  });
}

Status leaky_relu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T alpha = static_cast<T>(math::leaky_relu_alpha(ctx.attr<double>("alpha")));
    const T* in = x.data<T>();
    T* out = y.mutable_data<T>();
    cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = math::leaky_relu(in[i], alpha);
    });
    return Status();
  });
}

Status logical_not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  const bool* in = x.data<bool>();
  bool* out = y.mutable_data<bool>();
  cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = math::LogicalNot::apply(in[i]);
  });
  return Status();
}

Status relu_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& y = ctx.input(1);
  if (!(dy.shape() == y.shape())) return graph::invalid_argument("dy " + dy.type_string() + " and y " + y.type_string() + " differ");
  Tensor& dx = ctx.allocate_output(0, dy.dtype(), dy.shape());
  return cpu::visit_dtype<float, double>(dy.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* g = dy.data<T>();
    const T* out = y.data<T>();
    T* d = dx.mutable_data<T>();
    cpu::parallel_for(dy.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) d[i] = math::relu_grad(g[i], out[i]);
    });
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// d/dx of each op, from x, y = op(x) and dy.
Grads neg_grad(GradientContext& g) { return {neg(g.builder, g.grad(0))}; }
Grads exp_grad(GradientContext& g) { return {mul(g.builder, g.grad(0), g.output(0))}; }
Grads log_grad(GradientContext& g) { return {div(g.builder, g.grad(0), g.input(0))}; }
Grads sqrt_grad(GradientContext& g) {  // dy * 0.5 / y
  auto& b = g.builder;
  return {div(b, mul(b, g.grad(0), scalar_of(b, 0.5, g.output(0))), g.output(0))};
}
Grads rsqrt_grad(GradientContext& g) {  // dy * -0.5 * y^3
  auto& b = g.builder;
  const ValueRef y = g.output(0);
  const ValueRef half = scalar_of(b, -0.5, y);
  return {mul(b, g.grad(0), mul(b, half, mul(b, y, square(b, y))))};
}
Grads square_grad(GradientContext& g) {
  auto& b = g.builder;
  return {mul(b, g.grad(0), mul(b, scalar_of(b, 2.0, g.input(0)), g.input(0)))};
}
Grads relu_grad(GradientContext& g) {
  return {g.builder.add_value({.op = "ReluGrad", .inputs = {g.grad(0), g.output(0)}})};
}
Grads leaky_relu_grad(GradientContext& g) {  // dy where x > 0, else alpha * dy (TensorFlow's LeakyReluGrad)
  auto& b = g.builder;
  const ValueRef x = g.input(0), dy = g.grad(0);
  const ValueRef positive = greater(b, x, scalar_of(b, 0.0, x));
  const ValueRef scaled = mul(b, dy, scalar_of(b, math::leaky_relu_alpha(g.attr<double>("alpha")), x));
  return {select(b, positive, dy, scaled)};
}
Grads sigmoid_grad(GradientContext& g) {  // dy * y * (1 - y)
  auto& b = g.builder;
  const ValueRef y = g.output(0);
  return {mul(b, g.grad(0), mul(b, y, sub(b, scalar_of(b, 1.0, y), y)))};
}
Grads tanh_grad(GradientContext& g) {  // dy * (1 - y^2)
  auto& b = g.builder;
  const ValueRef y = g.output(0);
  const ValueRef one = scalar_of(b, 1.0, y);
  return {mul(b, g.grad(0), sub(b, one, square(b, y)))};
}

Grads abs_grad(GradientContext& g) { return {mul(g.builder, g.grad(0), sign(g.builder, g.input(0)))}; }
Grads sign_grad(GradientContext& g) { return {zeros_like(g.builder, g.input(0))}; }  // TensorFlow's: zero
Grads erf_grad(GradientContext& g) {  // dy * 2 / sqrt(pi) * exp(-x^2)
  // One node per statement: the order of evaluating a call's arguments is unspecified.
  auto& b = g.builder;
  const ValueRef x = g.input(0);
  const ValueRef x2 = square(b, x);
  const ValueRef density = exp(b, neg(b, x2));
  const ValueRef two_over_root_pi = scalar_of(b, 1.12837916709551257390, x);
  return {mul(b, g.grad(0), mul(b, two_over_root_pi, density))};
}
Grads softplus_grad(GradientContext& g) { return {mul(g.builder, g.grad(0), sigmoid(g.builder, g.input(0)))}; }
Grads gelu_grad(GradientContext& g) {
  return {g.builder.add_value(
      {.op = "GeluGrad", .inputs = {g.grad(0), g.input(0)}, .attrs = {{"approximate", g.attr<bool>("approximate")}}})};
}

template <class Op>
void register_unary(const char* name, graph::GradientFn gradient, graph::OpRegistry& schemas,
                    runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = name,
      .inputs = {"x"},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "Element-wise unary function.",
      .gradient = std::move(gradient)});
  kernels.add(name, graph::DeviceKind::cpu, {unary_kernel<Op>});
}

}  // namespace

void register_unary_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_unary<Neg>("Neg", neg_grad, schemas, kernels);
  register_unary<Exp>("Exp", exp_grad, schemas, kernels);
  register_unary<Log>("Log", log_grad, schemas, kernels);
  register_unary<Sqrt>("Sqrt", sqrt_grad, schemas, kernels);
  register_unary<Rsqrt>("Rsqrt", rsqrt_grad, schemas, kernels);
  register_unary<Square>("Square", square_grad, schemas, kernels);
  register_unary<Relu>("Relu", relu_grad, schemas, kernels);
  register_unary<Sigmoid>("Sigmoid", sigmoid_grad, schemas, kernels);
  register_unary<Tanh>("Tanh", tanh_grad, schemas, kernels);
  register_unary<Abs>("Abs", abs_grad, schemas, kernels);
  register_unary<Sign>("Sign", sign_grad, schemas, kernels);
  register_unary<Erf>("Erf", erf_grad, schemas, kernels);
  register_unary<Softplus>("Softplus", softplus_grad, schemas, kernels);
  schemas.add(graph::OpSchema{
      .name = "Gelu",
      .inputs = {"x"},
      .attrs = {{"approximate", graph::AttrType::boolean, false}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "x * P(X <= x) for a standard normal X, exactly with erf or (approximate) with tanh, as tf.nn.gelu.",
      .gradient = gelu_grad});
  kernels.add("Gelu", graph::DeviceKind::cpu, {.fn = gelu_kernel, .prepare = cpu::prepare_dnnl_kernel});
  schemas.add(graph::OpSchema{
      .name = "GeluGrad",
      .inputs = {"dy", "x"},
      .attrs = {{"approximate", graph::AttrType::boolean, false}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
        MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "dy times the derivative of Gelu (of the same form) at x: the gradient of Gelu.",
      .no_gradient = "second derivatives of Gelu are not supported"});
  kernels.add("GeluGrad", graph::DeviceKind::cpu, {.fn = gelu_grad_kernel, .prepare = cpu::prepare_dnnl_kernel});
  schemas.add(graph::OpSchema{
      .name = "LeakyRelu",
      .inputs = {"x"},
      .attrs = {{"alpha", graph::AttrType::real, 0.2}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "x where x > 0, else alpha * x, as tf.nn.leaky_relu.",
      .gradient = leaky_relu_grad});
  kernels.add("LeakyRelu", graph::DeviceKind::cpu, {leaky_relu_kernel});
  schemas.add(graph::OpSchema{
      .name = "LogicalNot",
      .inputs = {"x"},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::boolean}));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "The negation of each bool.",
      .no_gradient = "it takes and gives booleans"});
  kernels.add("LogicalNot", graph::DeviceKind::cpu, {logical_not_kernel});
  schemas.add(graph::OpSchema{
      .name = "ReluGrad",
      .inputs = {"dy", "y"},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
        MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "dy where y > 0, else 0: the gradient of Relu.",
      .no_gradient = "second derivatives of Relu are not supported"});
  kernels.add("ReluGrad", graph::DeviceKind::cpu, {relu_grad_kernel});
}

ValueRef neg(Builder& b, ValueRef x) { return b.add_value({.op = "Neg", .inputs = {x}}); }
ValueRef exp(Builder& b, ValueRef x) { return b.add_value({.op = "Exp", .inputs = {x}}); }
ValueRef log(Builder& b, ValueRef x) { return b.add_value({.op = "Log", .inputs = {x}}); }
ValueRef sqrt(Builder& b, ValueRef x) { return b.add_value({.op = "Sqrt", .inputs = {x}}); }
ValueRef rsqrt(Builder& b, ValueRef x) { return b.add_value({.op = "Rsqrt", .inputs = {x}}); }
ValueRef square(Builder& b, ValueRef x) { return b.add_value({.op = "Square", .inputs = {x}}); }
ValueRef relu(Builder& b, ValueRef x) { return b.add_value({.op = "Relu", .inputs = {x}}); }
ValueRef sigmoid(Builder& b, ValueRef x) { return b.add_value({.op = "Sigmoid", .inputs = {x}}); }
ValueRef tanh(Builder& b, ValueRef x) { return b.add_value({.op = "Tanh", .inputs = {x}}); }
ValueRef abs(Builder& b, ValueRef x) { return b.add_value({.op = "Abs", .inputs = {x}}); }
ValueRef sign(Builder& b, ValueRef x) { return b.add_value({.op = "Sign", .inputs = {x}}); }
ValueRef erf(Builder& b, ValueRef x) { return b.add_value({.op = "Erf", .inputs = {x}}); }
ValueRef softplus(Builder& b, ValueRef x) { return b.add_value({.op = "Softplus", .inputs = {x}}); }
ValueRef leaky_relu(Builder& b, ValueRef x, double alpha) {
  return b.add_value({.op = "LeakyRelu", .inputs = {x}, .attrs = {{"alpha", alpha}}});
}
ValueRef logical_not(Builder& b, ValueRef x) { return b.add_value({.op = "LogicalNot", .inputs = {x}}); }
ValueRef gelu(Builder& b, ValueRef x, bool approximate) {
  return b.add_value({.op = "Gelu", .inputs = {x}, .attrs = {{"approximate", approximate}}});
}

}  // namespace mirra::ops
