// SparseApplyGradientDescent, SparseApplyMomentum and SparseApplyAdam: schemas, builders and CPU
// kernels.
#include "ops/sparse_optimizer_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_math.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

// Each op's inputs: the variable, its slots, then rows, indices, the learning rate, (Adam's step,) and
// the optional gate.
struct SparseLayout {
  size_t slots;
  bool step;    // Adam's count of updates done, after the learning rate
  size_t gate;  // ops/kernel_shapes.h's, which the GPU kernels read too
  constexpr size_t rows() const { return 1 + slots; }
  constexpr size_t indices() const { return 2 + slots; }
  constexpr size_t learning_rate() const { return 3 + slots; }
};
constexpr SparseLayout kGradientDescent{0, false, kSparseGradientDescentGate}, kMomentum{1, false, kSparseMomentumGate},
    kAdam{2, true, kSparseAdamGate};
constexpr bool gate_follows(const SparseLayout& layout) { return layout.gate == layout.learning_rate() + (layout.step ? 2 : 1); }
static_assert(gate_follows(kGradientDescent) && gate_follows(kMomentum) && gate_follows(kAdam));

// The distinct indices named, ascending, each with the positions of its rows in their order.
struct RowGroups {
  std::vector<int64_t> index;      // one per group
  std::vector<int64_t> starts;     // group k's positions are positions[starts[k] .. starts[k + 1])
  std::vector<int64_t> positions;  // of rows, grouped
};

template <class I>
Expected<RowGroups> group_rows(const I* indices, int64_t n, int64_t limit) {
  RowGroups groups;
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<int64_t>(indices[i]);
    if (v >= limit) {
      return graph::invalid_argument("indices[" + std::to_string(i) + "] = " + std::to_string(v) +
                                     " is not in [0, " + std::to_string(limit) + ")");
    }
    if (v >= 0) groups.positions.push_back(i);
  }
  std::stable_sort(groups.positions.begin(), groups.positions.end(),
                   [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  for (size_t k = 0; k < groups.positions.size(); ++k) {
    const auto v = static_cast<int64_t>(indices[groups.positions[k]]);
    if (groups.index.empty() || groups.index.back() != v) {
      groups.index.push_back(v);
      groups.starts.push_back(static_cast<int64_t>(k));
    }
  }
  groups.starts.push_back(static_cast<int64_t>(groups.positions.size()));
  return groups;
}

// Calls update(row of the variable, its summed gradient row, width) for each row named, the groups in
// parallel: each sum adds its rows in their order, from zero.
template <class T, class Update>
Status for_each_named_row(const KernelContext& ctx, const SparseLayout& layout, const Update& update) {
  const Tensor& variable = ctx.input(0);
  const Tensor& indices = ctx.input(layout.indices());
  const int64_t width = variable.shape().rank() > 1 ? variable.num_elements() / variable.shape().dim(0) : 1;
  const T* rows = ctx.input(layout.rows()).data<T>();
  return cpu::visit_dtype<int32_t, int64_t>(indices.dtype(), [&]<class I>(cpu::Type<I>) {
    MIRRA_ASSIGN_OR_RETURN(const RowGroups groups, group_rows(indices.data<I>(), indices.num_elements(), variable.shape().dim(0)));
    const auto count = static_cast<int64_t>(groups.index.size());
    cpu::parallel_for(count, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(width, 1)),
                      [&](int64_t begin, int64_t end) {
                        std::vector<T> sum(static_cast<size_t>(width));
                        for (int64_t k = begin; k < end; ++k) {
                          std::fill(sum.begin(), sum.end(), T(0));
                          for (int64_t p = groups.starts[k]; p < groups.starts[k + 1]; ++p) {
                            const T* row = rows + groups.positions[p] * width;
                            for (int64_t c = 0; c < width; ++c) sum[c] += row[c];
                          }
                          update(groups.index[k] * width, sum.data(), width);
                        }
                      });
    return Status();
  });
}

Status sparse_apply_gradient_descent_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_sparse_update_operands(ctx, kGradientDescent.slots));
  if (update_gated_off(ctx, kGradientDescent.gate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const math::GradientDescentUpdate<T> update{ctx.input(kGradientDescent.learning_rate()).data<T>()[0]};
    T* v = variable.mutable_data<T>();
    return for_each_named_row<T>(ctx, kGradientDescent, [&](int64_t at, const T* g, int64_t width) {
      for (int64_t c = 0; c < width; ++c) update.apply(v[at + c], g[c]);
    });
  });
}

Status sparse_apply_momentum_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_sparse_update_operands(ctx, kMomentum.slots));
  if (update_gated_off(ctx, kMomentum.gate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  Tensor& accumulator = ctx.input_for_update(1);
  const bool nesterov = ctx.attr<bool>("use_nesterov");
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const T lr = ctx.input(kMomentum.learning_rate()).data<T>()[0];
    const T m = static_cast<T>(ctx.attr<double>("momentum"));
    T* v = variable.mutable_data<T>();
    T* a = accumulator.mutable_data<T>();
    const auto run = [&](const auto& update) {
      return for_each_named_row<T>(ctx, kMomentum, [&](int64_t at, const T* g, int64_t width) {
        for (int64_t c = 0; c < width; ++c) update.apply(v[at + c], a[at + c], g[c]);
      });
    };
    return nesterov ? run(math::MomentumUpdate<T, true>{lr, m}) : run(math::MomentumUpdate<T, false>{lr, m});
  });
}

// Adam's update with the bias corrections of step + 1, as ApplyAdam's, on the rows named alone.
Status sparse_apply_adam_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_sparse_update_operands(ctx, kAdam.slots));
  if (update_gated_off(ctx, kAdam.gate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  Tensor& first_moment = ctx.input_for_update(1);
  Tensor& second_moment = ctx.input_for_update(2);
  const double t = static_cast<double>(ctx.input(kAdam.learning_rate() + 1).data<int64_t>()[0] + 1);
  const double beta1 = ctx.attr<double>("beta1"), beta2 = ctx.attr<double>("beta2");
  const double correction1 = 1.0 - std::pow(beta1, t), correction2 = 1.0 - std::pow(beta2, t);
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const double lr = static_cast<double>(ctx.input(kAdam.learning_rate()).data<T>()[0]);
    const math::AdamUpdate<T> update{static_cast<T>(beta1),
                                     static_cast<T>(beta2),
                                     static_cast<T>(lr / correction1),
                                     static_cast<T>(1.0 / std::sqrt(correction2)),
                                     T(1),
                                     static_cast<T>(ctx.attr<double>("epsilon"))};
    T* v = variable.mutable_data<T>();
    T* m1 = first_moment.mutable_data<T>();
    T* m2 = second_moment.mutable_data<T>();
    return for_each_named_row<T>(ctx, kAdam, [&](int64_t at, const T* g, int64_t width) {
      for (int64_t c = 0; c < width; ++c) update.apply(v[at + c], m1[at + c], m2[at + c], g[c]);
    });
  });
}

// (variable, slots..., rows, indices, learning_rate[, step][, apply]): the variable floating of rank
// at least 1, the slots of its dtype and shape, rows of its dtype and shape indices.shape +
// variable.shape[1:], integer indices, a scalar learning rate of its dtype, an i64 scalar step.
graph::InferFn infer_sparse_apply(SparseLayout layout) {
  return [layout](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
    MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
    const graph::TensorType& variable = ctx.input(0);
    if (variable.shape.rank() < 1) return ctx.error("the variable must have rows (rank 1 or more)");
    for (size_t i = 1; i <= layout.slots; ++i) {
      if (ctx.input(i).dtype != variable.dtype || !ctx.input(i).shape.compatible_with(variable.shape)) {
        return ctx.error("slot " + std::to_string(i) + " must have the variable's dtype and shape");
      }
    }
    MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, layout.indices(), {DType::i32, DType::i64}));
    graph::Shape rows = ctx.input(layout.indices()).shape;
    rows.dims.insert(rows.dims.end(), variable.shape.dims.begin() + 1, variable.shape.dims.end());
    if (ctx.input(layout.rows()).dtype != variable.dtype || !ctx.input(layout.rows()).shape.compatible_with(rows)) {
      return ctx.error("the rows must be " + graph::TensorType{variable.dtype, rows}.to_string() +
                       " (indices' shape, then the variable's row)");
    }
    if (ctx.input(layout.learning_rate()).dtype != variable.dtype || ctx.input(layout.learning_rate()).shape.rank() != 0) {
      return ctx.error("the learning rate must be a scalar of the variable's dtype");
    }
    const size_t step = layout.learning_rate() + 1;
    if (layout.step && (ctx.input(step).dtype != DType::i64 || ctx.input(step).shape.rank() != 0)) {
      return ctx.error("the step must be an i64 scalar");
    }
    const size_t gate = layout.gate;
    if (ctx.num_inputs() > gate && (ctx.input(gate).dtype != DType::boolean || ctx.input(gate).shape.rank() != 0)) {
      return ctx.error("the gate must be a bool scalar");
    }
    return std::vector<TensorType>{};
  };
}

std::vector<ValueRef> gated(std::vector<ValueRef> inputs, ValueRef apply) {
  if (apply.valid()) inputs.push_back(apply);
  return inputs;
}

}  // namespace

void register_sparse_optimizer_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  constexpr const char* kNoGradient = "it updates state and outputs nothing";
  schemas.add(graph::OpSchema{.name = "SparseApplyGradientDescent",
                              .inputs = {"variable", "rows", "indices", "learning_rate", "apply"},
                              .optional_inputs = 1,
                              .updates = {0},
                              .update_gradient = kGradientDescent.rows(),
                              .infer = infer_sparse_apply(kGradientDescent),
                              .summary = "variable[i] -= learning_rate * (the sum of the rows of index i), for each index "
                                         "named; nothing when the optional bool apply is false.",
                              .no_gradient = kNoGradient});
  kernels.add("SparseApplyGradientDescent", graph::DeviceKind::cpu, {sparse_apply_gradient_descent_kernel});
  schemas.add(graph::OpSchema{.name = "SparseApplyMomentum",
                              .inputs = {"variable", "accumulator", "rows", "indices", "learning_rate", "apply"},
                              .optional_inputs = 1,
                              .attrs = {{"momentum", AttrType::real, {}}, {"use_nesterov", AttrType::boolean, false}},
                              .updates = {0, 1},
                              .update_gradient = kMomentum.rows(),
                              .infer = infer_sparse_apply(kMomentum),
                              .summary = "ApplyMomentum on the rows named alone, each with the sum of its rows as its "
                                         "gradient (lazy: other rows and their accumulator stay).",
                              .no_gradient = kNoGradient});
  kernels.add("SparseApplyMomentum", graph::DeviceKind::cpu, {sparse_apply_momentum_kernel});
  schemas.add(graph::OpSchema{.name = "SparseApplyAdam",
                              .inputs = {"variable", "m", "v", "rows", "indices", "learning_rate", "step", "apply"},
                              .optional_inputs = 1,
                              .attrs = {{"beta1", AttrType::real, 0.9},
                                        {"beta2", AttrType::real, 0.999},
                                        {"epsilon", AttrType::real, 1e-7}},
                              .updates = {0, 1, 2},
                              .update_gradient = kAdam.rows(),
                              .infer = infer_sparse_apply(kAdam),
                              .summary = "ApplyAdam on the rows named alone, each with the sum of its rows as its "
                                         "gradient (LazyAdam: other rows and their moments stay).",
                              .no_gradient = kNoGradient});
  kernels.add("SparseApplyAdam", graph::DeviceKind::cpu, {sparse_apply_adam_kernel});
}

NodeId sparse_apply_gradient_descent(Builder& b, ValueRef variable, const SparseGradient& gradient, ValueRef learning_rate,
                                     ValueRef apply) {
  return b.add({.op = "SparseApplyGradientDescent",
                .inputs = gated({variable, gradient.rows, gradient.indices, learning_rate}, apply)});
}

NodeId sparse_apply_momentum(Builder& b, ValueRef variable, ValueRef accumulator, const SparseGradient& gradient,
                             ValueRef learning_rate, double momentum, bool nesterov, ValueRef apply) {
  return b.add({.op = "SparseApplyMomentum",
                .inputs = gated({variable, accumulator, gradient.rows, gradient.indices, learning_rate}, apply),
                .attrs = {{"momentum", momentum}, {"use_nesterov", nesterov}}});
}

NodeId sparse_apply_adam(Builder& b, const SparseAdamOperands& operands, double beta1, double beta2, double epsilon,
                         ValueRef apply) {
  return b.add({.op = "SparseApplyAdam",
                .inputs = gated({operands.variable, operands.m, operands.v, operands.gradient.rows,
                                 operands.gradient.indices, operands.learning_rate, operands.step},
                                apply),
                .attrs = {{"beta1", beta1}, {"beta2", beta2}, {"epsilon", epsilon}}});
}

}  // namespace mirra::ops
