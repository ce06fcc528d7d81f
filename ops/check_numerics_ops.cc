// CheckNumerics: schema, builder, gradient and CPU kernel (a parallel count of non-finite elements).
#include <atomic>
#include <cmath>

#include "ops/check_numerics_ops.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

Status check_numerics_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::atomic<int64_t> nans{0}, infinities{0};
  MIRRA_RETURN_IF_ERROR((cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      int64_t nan = 0, inf = 0;
      for (int64_t i = begin; i < end; ++i) {
        nan += std::isnan(in[i]);
        inf += std::isinf(in[i]);
      }
      nans += nan;
      infinities += inf;
    });
    return Status();
  })));
  if (nans.load() + infinities.load() > 0) {
    return graph::invalid_argument(ctx.attr<std::string>("message") + ": " + x.type_string() + " holds " +
                                   std::to_string(nans.load()) + " NaN and " + std::to_string(infinities.load()) +
                                   " infinite values");
  }
  ctx.set_output(0, x);
  return Status();
}

std::vector<graph::ValueRef> check_numerics_grad(graph::GradientContext& g) {
  return {check_numerics(g.builder, g.grad(0), "the gradient of " + g.attr<std::string>("message"))};
}

}  // namespace

void register_check_numerics_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "CheckNumerics",
                              .inputs = {"tensor"},
                              .attrs = {{"message", AttrType::string, {}}},
                              .traits = graph::kForwardsInput,
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::f32, graph::DType::f64}));
                                return std::vector<TensorType>{ctx.input(0)};
                              },
                              .summary = "Its input (the buffer is shared), or an error naming message when it holds a NaN or an infinity.",
                              .gradient = check_numerics_grad});
  kernels.add("CheckNumerics", graph::DeviceKind::cpu, {check_numerics_kernel});
}

graph::ValueRef check_numerics(graph::Builder& b, graph::ValueRef x, std::string message) {
  return b.add_value({.op = "CheckNumerics", .inputs = {x}, .attrs = {{"message", std::move(message)}}});
}

}  // namespace mirra::ops
