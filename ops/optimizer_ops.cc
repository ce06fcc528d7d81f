// ApplyGradientDescent, ApplyMomentum and NoOp: schemas, builders and CPU kernels.
#include "ops/optimizer_ops.h"

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

// The update's operands must agree with the variable; a scalar learning rate of its dtype.
Status check_operands(const KernelContext& ctx, size_t gradient_index) {
  const Tensor& variable = ctx.input(0);
  for (size_t i = 1; i <= gradient_index; ++i) {
    if (!(ctx.input(i).shape() == variable.shape())) {
      return graph::invalid_argument("operand " + std::to_string(i) + " " + ctx.input(i).type_string() +
                                     " does not match the variable " + variable.type_string());
    }
  }
  return Status();
}

Status apply_gradient_descent_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_operands(ctx, 1));
  Tensor& variable = ctx.input_for_update(0);
  const Tensor& gradient = ctx.input(1);
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const T lr = ctx.input(2).data<T>()[0];
    T* v = variable.mutable_data<T>();
    const T* g = gradient.data<T>();
    cpu::parallel_for(variable.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) v[i] -= lr * g[i];
    });
    return Status();
  });
}

Status apply_momentum_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_operands(ctx, 2));
  Tensor& variable = ctx.input_for_update(0);
  Tensor& accumulator = ctx.input_for_update(1);
  const Tensor& gradient = ctx.input(2);
  const bool nesterov = ctx.attr<bool>("use_nesterov");
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const T lr = ctx.input(3).data<T>()[0];
    const T m = static_cast<T>(ctx.attr<double>("momentum"));
    T* v = variable.mutable_data<T>();
    T* a = accumulator.mutable_data<T>();
    const T* g = gradient.data<T>();
    cpu::parallel_for(variable.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        a[i] = m * a[i] + g[i];
        v[i] -= nesterov ? lr * (g[i] + m * a[i]) : lr * a[i];
      }
    });
    return Status();
  });
}

Status no_op_kernel(KernelContext&) { return Status(); }

// Inputs 0..n-1 are the variable, its slots and its gradient (same dtype and shape); the last is a
// scalar learning rate of that dtype.
Expected<std::vector<TensorType>> infer_apply(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
  MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
  const Shape& variable = ctx.input(0).shape;
  for (size_t i = 1; i + 1 < ctx.num_inputs(); ++i) {
    const Shape& operand = ctx.input(i).shape;
    bool matches = operand.rank() == variable.rank();
    for (int d = 0; matches && d < variable.rank(); ++d) matches = operand.dim(d) < 0 || operand.dim(d) == variable.dim(d);
    if (!matches) return ctx.error("operand " + std::to_string(i) + " must have the variable's shape");
  }
  if (ctx.input(ctx.num_inputs() - 1).shape.rank() != 0) return ctx.error("the learning rate must be a scalar");
  return std::vector<TensorType>{};
}

}  // namespace

void register_optimizer_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "ApplyGradientDescent",
                              .inputs = {"variable", "gradient", "learning_rate"},
                              .traits = graph::kStateful,
                              .infer = infer_apply,
                              .summary = "variable -= learning_rate * gradient, in place.",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("ApplyGradientDescent", graph::DeviceKind::cpu, {apply_gradient_descent_kernel});
  schemas.add(graph::OpSchema{.name = "ApplyMomentum",
                              .inputs = {"variable", "accumulator", "gradient", "learning_rate"},
                              .attrs = {{"momentum", AttrType::real, {}}, {"use_nesterov", AttrType::boolean, false}},
                              .traits = graph::kStateful,
                              .infer = infer_apply,
                              .summary = "accumulator = momentum * accumulator + gradient; variable -= learning_rate * "
                                         "accumulator (Nesterov: learning_rate * (gradient + momentum * accumulator)).",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("ApplyMomentum", graph::DeviceKind::cpu, {apply_momentum_kernel});
  schemas.add(graph::OpSchema{.name = "NoOp",
                              .infer = [](const InferContext&) -> Expected<std::vector<TensorType>> {
                                return std::vector<TensorType>{};
                              },
                              .summary = "Does nothing; its control inputs make it a target that runs them.",
                              .no_gradient = "it has no inputs"});
  kernels.add("NoOp", graph::DeviceKind::cpu, {no_op_kernel});
}

NodeId apply_gradient_descent(Builder& b, ValueRef variable, ValueRef gradient, ValueRef learning_rate) {
  return b.add({.op = "ApplyGradientDescent", .inputs = {variable, gradient, learning_rate}});
}

NodeId apply_momentum(Builder& b, ValueRef variable, ValueRef accumulator, ValueRef gradient, ValueRef learning_rate,
                      double momentum, bool nesterov) {
  return b.add({.op = "ApplyMomentum",
                .inputs = {variable, accumulator, gradient, learning_rate},
                .attrs = {{"momentum", momentum}, {"use_nesterov", nesterov}}});
}

NodeId no_op(Builder& b, std::string_view name, std::vector<NodeId> after) {
  return b.add({.op = "NoOp", .name = std::string(name), .control_inputs = std::move(after)});
}

}  // namespace mirra::ops
