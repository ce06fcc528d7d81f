// Unary element-wise ops: one functor each, one shared schema and kernel template.
#include <cmath>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_ops.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using runtime::KernelContext;
using runtime::Tensor;

namespace {

struct Neg { template <class T> static T apply(T x) { return -x; } };
struct Exp { template <class T> static T apply(T x) { return std::exp(x); } };
struct Log { template <class T> static T apply(T x) { return std::log(x); } };
struct Sqrt { template <class T> static T apply(T x) { return std::sqrt(x); } };
struct Rsqrt { template <class T> static T apply(T x) { return T(1) / std::sqrt(x); } };
struct Square { template <class T> static T apply(T x) { return x * x; } };
struct Relu { template <class T> static T apply(T x) { return x > T(0) ? x : T(0); } };
struct Sigmoid { template <class T> static T apply(T x) { return T(1) / (T(1) + std::exp(-x)); } };
struct Tanh { template <class T> static T apply(T x) { return std::tanh(x); } };

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

template <class Op>
void register_unary(const char* name, graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = name,
      .inputs = {"x"},
      .traits = graph::kElementwise,
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .summary = "Element-wise unary function."});
  kernels.add(name, graph::DeviceKind::cpu, {unary_kernel<Op>});
}

}  // namespace

void register_unary_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_unary<Neg>("Neg", schemas, kernels);
  register_unary<Exp>("Exp", schemas, kernels);
  register_unary<Log>("Log", schemas, kernels);
  register_unary<Sqrt>("Sqrt", schemas, kernels);
  register_unary<Rsqrt>("Rsqrt", schemas, kernels);
  register_unary<Square>("Square", schemas, kernels);
  register_unary<Relu>("Relu", schemas, kernels);
  register_unary<Sigmoid>("Sigmoid", schemas, kernels);
  register_unary<Tanh>("Tanh", schemas, kernels);
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

}  // namespace mirra::ops
