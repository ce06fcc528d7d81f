// Softmax, LogSoftmax and SparseSoftmaxCrossEntropyWithLogits: schemas, builders and CPU kernels.
// Each row is shifted by its maximum before exponentiating, so large logits do not overflow.
#include <cmath>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/array_ops.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/reduce_ops.h"
#include "ops/shape_inference.h"
#include "ops/softmax_ops.h"

namespace mirra::ops {

using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// log(sum(exp(row - max))) and max, for one row.
template <class T>
std::pair<T, T> row_log_sum_exp(const T* row, int64_t n) {
  T max = row[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, row[i]);
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
  return {max, std::log(sum)};
}

template <bool kLog>
Status softmax_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  const int64_t classes = x.dim(x.rank() - 1);
  if (classes == 0) return Status();
  const int64_t rows = x.num_elements() / classes;
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    T* out = y.mutable_data<T>();
    cpu::parallel_for(rows, std::max<int64_t>(1, 4096 / classes), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = in + r * classes;
        const auto [max, log_sum] = row_log_sum_exp(row, classes);
        for (int64_t i = 0; i < classes; ++i) {
          const T shifted = row[i] - max - log_sum;
          out[r * classes + i] = kLog ? shifted : std::exp(shifted);
        }
      }
    });
    return Status();
  });
}

Status sparse_xent_kernel(KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  const int64_t batch = logits.dim(0);
  const int64_t classes = logits.dim(1);
  MIRRA_RETURN_IF_ERROR(check_labels(logits, labels));
  Tensor& loss = ctx.allocate_output(0, logits.dtype(), TensorShape{batch});
  Tensor& backprop = ctx.allocate_output(1, logits.dtype(), logits.shape());
  // Labels are checked first, so that a bad one is an error and not a read out of bounds.
  std::vector<int64_t> label(static_cast<size_t>(batch));
  Status labels_ok = cpu::visit_dtype<int32_t, int64_t>(labels.dtype(), [&]<class L>(cpu::Type<L>) {
    const L* pl = labels.data<L>();
    for (int64_t i = 0; i < batch; ++i) {
      if (pl[i] < 0 || pl[i] >= classes) {
        return graph::invalid_argument("label " + std::to_string(pl[i]) + " of example " + std::to_string(i) +
                                       " is outside [0, " + std::to_string(classes) + ")");
      }
      label[static_cast<size_t>(i)] = pl[i];
    }
    return Status();
  });
  MIRRA_RETURN_IF_ERROR(labels_ok);
  return cpu::visit_dtype<float, double>(logits.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = logits.data<T>();
    T* pl = loss.mutable_data<T>();
    T* pg = backprop.mutable_data<T>();
    cpu::parallel_for(batch, std::max<int64_t>(1, 4096 / std::max<int64_t>(classes, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = in + r * classes;
        const auto [max, log_sum] = row_log_sum_exp(row, classes);
        const int64_t target = label[static_cast<size_t>(r)];
        pl[r] = log_sum - (row[target] - max);
        for (int64_t i = 0; i < classes; ++i) pg[r * classes + i] = std::exp(row[i] - max - log_sum) - (i == target ? T(1) : T(0));
      }
    });
    return Status();
  });
}

Expected<std::vector<TensorType>> infer_softmax(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
  if (ctx.input(0).shape.rank() < 1) return ctx.error("logits must have rank 1 or more");
  return std::vector<TensorType>{ctx.input(0)};
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

Grads softmax_grad(GradientContext& g) {  // y * (dy - sum(dy * y))
  auto& b = g.builder;
  const ValueRef y = g.output(0), dy = g.grad(0);
  return {mul(b, y, sub(b, dy, reduce_sum(b, mul(b, dy, y), {-1}, true)))};
}

Grads log_softmax_grad(GradientContext& g) {  // dy - softmax * sum(dy)
  auto& b = g.builder;
  const ValueRef y = g.output(0), dy = g.grad(0);
  const ValueRef softmax = exp(b, y);
  return {sub(b, dy, mul(b, softmax, reduce_sum(b, dy, {-1}, true)))};
}

Grads sparse_xent_grad(GradientContext& g) {
  auto& b = g.builder;
  if (g.grad(1).valid()) {
    b.fail(graph::unimplemented("node '" + g.node.name + "': differentiating its backprop output is not supported"));
    return {};
  }
  return {mul(b, reshape(b, g.grad(0), {-1, 1}), g.output(1)), {}};
}

}  // namespace

void register_softmax_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "Softmax", .inputs = {"logits"}, .infer = infer_softmax,
                              .summary = "exp(x) / sum(exp(x)) along the last axis.", .gradient = softmax_grad});
  kernels.add("Softmax", graph::DeviceKind::cpu, {softmax_kernel<false>});
  schemas.add(graph::OpSchema{.name = "LogSoftmax", .inputs = {"logits"}, .infer = infer_softmax,
                              .summary = "x - log(sum(exp(x))) along the last axis.", .gradient = log_softmax_grad});
  kernels.add("LogSoftmax", graph::DeviceKind::cpu, {softmax_kernel<true>});

  schemas.add(graph::OpSchema{
      .name = "SparseSoftmaxCrossEntropyWithLogits",
      .inputs = {"logits", "labels"},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 1, {DType::i32, DType::i64}));
        MIRRA_RETURN_IF_ERROR(require_rank(ctx, 0, 2));
        MIRRA_RETURN_IF_ERROR(require_rank(ctx, 1, 1));
        const int64_t batch = ctx.input(0).shape.dim(0);
        const int64_t labels = ctx.input(1).shape.dim(0);
        if (batch >= 0 && labels >= 0 && batch != labels) return ctx.error("labels and logits differ in batch size");
        const DType dtype = ctx.input(0).dtype;
        return std::vector<TensorType>{{dtype, Shape{batch >= 0 ? batch : labels}}, ctx.input(0)};
      },
      .summary = "Per-example softmax cross-entropy against integer labels, and its gradient.",
      .gradient = sparse_xent_grad});
  kernels.add("SparseSoftmaxCrossEntropyWithLogits", graph::DeviceKind::cpu, {sparse_xent_kernel});
}

ValueRef softmax(Builder& b, ValueRef logits) { return b.add_value({.op = "Softmax", .inputs = {logits}}); }
ValueRef log_softmax(Builder& b, ValueRef logits) { return b.add_value({.op = "LogSoftmax", .inputs = {logits}}); }

SoftmaxCrossEntropy sparse_softmax_cross_entropy_with_logits(Builder& b, ValueRef logits, ValueRef labels) {
  const graph::NodeId id = b.add({.op = "SparseSoftmaxCrossEntropyWithLogits", .inputs = {logits, labels}});
  if (id == graph::kInvalidNode) return {};
  return {{id, 0}, {id, 1}};
}

}  // namespace mirra::ops
