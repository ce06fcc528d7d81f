// Binary element-wise ops with NumPy broadcasting: arithmetic (same dtype in and out), comparisons and
// the logical ops (to bool). Integer division by zero is an error, never a trap.
#include <algorithm>

#include "ops/cpu/broadcast.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/reduce.h"
#include "ops/elementwise_math.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"

namespace mirra::ops {

using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

using math::Add;
using math::Div;
using math::Equal;
using math::Greater;
using math::GreaterEqual;
using math::Less;
using math::LessEqual;
using math::LogicalAnd;
using math::LogicalOr;
using math::Maximum;
using math::Minimum;
using math::Mul;
using math::NotEqual;
using math::Pow;
using math::Sub;

template <class Op>
inline constexpr bool kToBool = math::kBoolOutput<Op>;
template <class Op>
inline constexpr bool kLogical = std::is_same_v<Op, LogicalAnd> || std::is_same_v<Op, LogicalOr>;

// The dtypes an op's inputs may have, as its schema states them and its kernel dispatches on them.
template <class Op>
std::vector<DType> input_dtypes() {
  if constexpr (kLogical<Op>) return {DType::boolean};
  if constexpr (std::is_same_v<Op, Pow>) return {DType::f32, DType::f64};
  return {DType::f32, DType::f64, DType::i32, DType::i64};
}

template <class Op, class F>
Status visit_input_dtype(DType dtype, F&& f) {
  if constexpr (kLogical<Op>) return cpu::visit_dtype<bool>(dtype, f);
  if constexpr (std::is_same_v<Op, Pow>) return cpu::visit_dtype<float, double>(dtype, f);
  return cpu::visit_dtype<float, double, int32_t, int64_t>(dtype, f);
}

template <class Op>
Status binary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  const auto shape = cpu::broadcast_shape(x.shape(), y.shape());
  if (!shape) {
    return graph::invalid_argument("shapes " + x.shape().to_string() + " and " + y.shape().to_string() +
                                   " do not broadcast");
  }
  Tensor& out = ctx.allocate_output(0, kToBool<Op> ? graph::DType::boolean : x.dtype(), *shape);
  return visit_input_dtype<Op>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    if constexpr (std::is_same_v<Op, Div> && std::is_integral_v<T>) {
      const auto divisors = y.values<T>();
      if (std::find(divisors.begin(), divisors.end(), T(0)) != divisors.end()) {
        return graph::invalid_argument("integer division by zero");
      }
    }
    using Out = std::conditional_t<kToBool<Op>, bool, T>;
    cpu::broadcast_apply<T, T, Out>(x, y, out, [](T a, T b) { return Op::template apply<T>(a, b); });
    return Status();
  });
}

Status sum_to_shape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& like = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const std::vector<int> axes, sum_to_shape_axes(x, like));
  // Nothing was broadcast (shapes the graph left unknown that agree): x itself.
  if (x.shape() == like.shape()) {
    ctx.set_output(0, x);
    return Status();
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), like.shape());
  return cpu::visit_dtype<float, double, int32_t, int64_t>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    cpu::reduce_into<T, cpu::Reduction::sum>(x, axes, y.mutable_data<T>());
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// Gradients of broadcasting ops are summed back to each input's shape.
Grads add_grad(GradientContext& g) {
  auto& b = g.builder;
  return {sum_to_shape(b, g.grad(0), g.input(0)), sum_to_shape(b, g.grad(0), g.input(1))};
}
Grads sub_grad(GradientContext& g) {
  auto& b = g.builder;
  return {sum_to_shape(b, g.grad(0), g.input(0)), sum_to_shape(b, neg(b, g.grad(0)), g.input(1))};
}
Grads mul_grad(GradientContext& g) {
  auto& b = g.builder;
  return {sum_to_shape(b, mul(b, g.grad(0), g.input(1)), g.input(0)),
          sum_to_shape(b, mul(b, g.grad(0), g.input(0)), g.input(1))};
}
Grads div_grad(GradientContext& g) {  // d(x/y) = dy/y, -dy*x/y^2
  auto& b = g.builder;
  const ValueRef x = g.input(0), y = g.input(1), dy = g.grad(0);
  const ValueRef dx = sum_to_shape(b, div(b, dy, y), x);
  const ValueRef dy_x = mul(b, dy, x);  // built in this order: argument evaluation order is unspecified
  const ValueRef y2 = square(b, y);
  return {dx, sum_to_shape(b, neg(b, div(b, dy_x, y2)), y)};
}
// Maximum and Minimum: to x where the output is x (ties go to x), else to y.
Grads extremum_grad(GradientContext& g) {
  auto& b = g.builder;
  const ValueRef x = g.input(0), y = g.input(1), dy = g.grad(0);
  const graph::DType dtype = b.type(x).dtype;
  const ValueRef x_wins = b.add_value({.op = "Cast", .inputs = {equal(b, g.output(0), x)}, .attrs = {{"dtype", dtype}}});
  const ValueRef to_x = sum_to_shape(b, mul(b, dy, x_wins), x);
  const ValueRef y_wins = sub(b, scalar_of(b, 1.0, x), x_wins);
  return {to_x, sum_to_shape(b, mul(b, dy, y_wins), y)};
}
// TensorFlow's rule: dx = dy y x^(y-1); dy = dy x^y log(x) where x > 0, else 0 (no real logarithm).
Grads pow_grad(GradientContext& g) {
  auto& b = g.builder;
  const ValueRef x = g.input(0), y = g.input(1), dy = g.grad(0), z = g.output(0);
  const ValueRef one = scalar_of(b, 1.0, x), zero = scalar_of(b, 0.0, x);
  const ValueRef y_minus_one = sub(b, y, one);
  const ValueRef slope_x = mul(b, y, pow(b, x, y_minus_one));
  const ValueRef dx = sum_to_shape(b, mul(b, dy, slope_x), x);
  const ValueRef positive = greater(b, x, zero);
  const ValueRef safe_x = select(b, positive, x, one);
  const ValueRef log_x = select(b, positive, log(b, safe_x), zero);
  const ValueRef slope_y = mul(b, z, log_x);
  return {dx, sum_to_shape(b, mul(b, dy, slope_y), y)};
}

template <class Op>
graph::GradientFn gradient_of() {
  if constexpr (std::is_same_v<Op, Add>) return add_grad;
  if constexpr (std::is_same_v<Op, Sub>) return sub_grad;
  if constexpr (std::is_same_v<Op, Mul>) return mul_grad;
  if constexpr (std::is_same_v<Op, Div>) return div_grad;
  if constexpr (std::is_same_v<Op, Maximum> || std::is_same_v<Op, Minimum>) return extremum_grad;
  if constexpr (std::is_same_v<Op, Pow>) return pow_grad;
  return {};
}

template <class Op>
void register_binary(const char* name, graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = name,
      .inputs = {"x", "y"},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        using graph::DType;
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, input_dtypes<Op>()));
        MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
        auto shape = broadcast_shapes(ctx.input(0).shape, ctx.input(1).shape);
        if (!shape) return ctx.error("shapes do not broadcast");
        return std::vector<TensorType>{{kToBool<Op> ? DType::boolean : ctx.input(0).dtype, *shape}};
      },
      .summary = "Element-wise binary function with NumPy broadcasting.",
      .gradient = gradient_of<Op>(),
      .no_gradient = kToBool<Op> ? "it outputs booleans" : ""});
  kernels.add(name, graph::DeviceKind::cpu, {binary_kernel<Op>});
}

}  // namespace

void register_binary_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_binary<Add>("Add", schemas, kernels);
  register_binary<Sub>("Sub", schemas, kernels);
  register_binary<Mul>("Mul", schemas, kernels);
  register_binary<Div>("Div", schemas, kernels);
  register_binary<Maximum>("Maximum", schemas, kernels);
  register_binary<Minimum>("Minimum", schemas, kernels);
  register_binary<Pow>("Pow", schemas, kernels);
  register_binary<Equal>("Equal", schemas, kernels);
  register_binary<NotEqual>("NotEqual", schemas, kernels);
  register_binary<Less>("Less", schemas, kernels);
  register_binary<LessEqual>("LessEqual", schemas, kernels);
  register_binary<Greater>("Greater", schemas, kernels);
  register_binary<GreaterEqual>("GreaterEqual", schemas, kernels);
  register_binary<LogicalAnd>("LogicalAnd", schemas, kernels);
  register_binary<LogicalOr>("LogicalOr", schemas, kernels);
  schemas.add(graph::OpSchema{
      .name = "SumToShape",
      .inputs = {"x", "like"},
      .traits = graph::kForwardsInput,  // x itself where nothing was broadcast
      .reads_only_shape = {1},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
        if (ctx.input(1).shape.rank() > ctx.input(0).shape.rank()) return ctx.error("like has a higher rank than x");
        return std::vector<TensorType>{{ctx.input(0).dtype, ctx.input(1).shape}};
      },
      .summary = "Sums x over the dims along which `like` was broadcast to x's shape (the gradient of broadcasting).",
      .no_gradient = "it is used only by gradients"});
  kernels.add("SumToShape", graph::DeviceKind::cpu, {sum_to_shape_kernel});
}

ValueRef sum_to_shape(Builder& b, ValueRef x, ValueRef like) {
  // Nothing to sum when the shapes already agree (and are known).
  if (x.valid() && like.valid() && b.type(x).shape == b.type(like).shape && b.type(x).shape.is_fully_defined()) return x;
  return b.add_value({.op = "SumToShape", .inputs = {x, like}});
}

ValueRef add(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Add", .inputs = {x, y}}); }
ValueRef sub(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Sub", .inputs = {x, y}}); }
ValueRef mul(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Mul", .inputs = {x, y}}); }
ValueRef div(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Div", .inputs = {x, y}}); }
ValueRef maximum(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Maximum", .inputs = {x, y}}); }
ValueRef minimum(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Minimum", .inputs = {x, y}}); }
ValueRef pow(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Pow", .inputs = {x, y}}); }
ValueRef equal(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Equal", .inputs = {x, y}}); }
ValueRef not_equal(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "NotEqual", .inputs = {x, y}}); }
ValueRef less(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Less", .inputs = {x, y}}); }
ValueRef less_equal(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "LessEqual", .inputs = {x, y}}); }
ValueRef greater(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "Greater", .inputs = {x, y}}); }
ValueRef greater_equal(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "GreaterEqual", .inputs = {x, y}}); }
ValueRef logical_and(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "LogicalAnd", .inputs = {x, y}}); }
ValueRef logical_or(Builder& b, ValueRef x, ValueRef y) { return b.add_value({.op = "LogicalOr", .inputs = {x, y}}); }

}  // namespace mirra::ops
