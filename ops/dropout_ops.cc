// Dropout: schema, builders, gradient (dy times the mask, output 1) and CPU kernel.
#include "ops/dropout_ops.h"

#include <string>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/philox.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

Expected<std::vector<TensorType>> infer_dropout(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 1, {DType::i64}));
  if (ctx.input(0).shape.rank() < 1) return ctx.error("x must have a batch dim");
  if (ctx.input(1).shape.rank() != 1) return ctx.error("keys must have rank 1");
  const double rate = ctx.attr<double>("rate");
  if (!(rate >= 0 && rate < 1)) return ctx.error("rate must be in [0, 1)");
  return std::vector<TensorType>{ctx.input(0), ctx.input(0)};
}

Status dropout_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& keys = ctx.input(1);
  MIRRA_ASSIGN_OR_RETURN(const int64_t per_example, dropout_elements_per_example(x, keys));
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& mask = ctx.allocate_output(1, x.dtype(), x.shape());
  const bool training = ctx.attr<bool>("training");
  const double rate = ctx.attr<double>("rate");
  const auto seed = static_cast<uint64_t>(ctx.attr<int64_t>("seed"));
  const int64_t* key = keys.data<int64_t>();
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    T* out = y.mutable_data<T>();
    T* kept = mask.mutable_data<T>();
    const T scale = T(1) / (T(1) - static_cast<T>(rate));
    cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t example = i / per_example;
        const bool keep = !training || philox::uniform(seed, static_cast<uint64_t>(key[example]),
                                                       static_cast<uint64_t>(i - example * per_example)) >= rate;
        kept[i] = keep ? (training ? scale : T(1)) : T(0);
        out[i] = training ? in[i] * kept[i] : in[i];
      }
    });
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

Grads dropout_grad(GradientContext& g) {
  if (!g.grad(0).valid()) return Grads(2);
  return {mul(g.builder, g.grad(0), g.output(1)), ValueRef{}};
}

}  // namespace

void register_dropout_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "Dropout",
      .inputs = {"x", "keys"},
      .attrs = {{"rate", AttrType::real, {}}, {"seed", AttrType::integer, int64_t{0}}, {"training", AttrType::boolean, true}},
      .training_attr = "training",
      .infer = infer_dropout,
      .summary = "In training, each element zeroed with probability rate by Philox's draw for (seed, its example's key, "
                 "its index in the example), the rest scaled by 1 / (1 - rate); output 1 is the mask (0 or that scale). "
                 "In evaluation, x.",
      .gradient = dropout_grad});
  kernels.add("Dropout", graph::DeviceKind::cpu, {dropout_kernel});
}

ValueRef example_keys(Builder& b) {
  if (const auto id = b.graph().find(std::string(kExampleKeysPlaceholder))) return {*id, 0};
  return placeholder(b, kExampleKeysPlaceholder, DType::i64, {-1});
}

ValueRef dropout(Builder& b, ValueRef x, ValueRef keys, double rate) {
  const auto seed = static_cast<int64_t>(b.next_seed() & 0x7fffffffffffffffull);
  return b.add_value({.op = "Dropout", .inputs = {x, keys}, .attrs = {{"rate", rate}, {"seed", seed}}});
}

}  // namespace mirra::ops
