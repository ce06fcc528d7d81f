// ApplyGradientDescent, ApplyMomentum, ApplyAdam, AssignAdd (each with an optional gate), Assign and
// NoOp: schemas, builders and CPU kernels.
#include "ops/optimizer_ops.h"

#include <cmath>
#include <cstring>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/registry.h"
#include "ops/elementwise_math.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "runtime/session.h"
#include "runtime/vector_clones.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

Status apply_gradient_descent_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 1));
  if (update_gated_off(ctx, kGradientDescentGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  const Tensor& gradient = ctx.input(1);
  const double weight_decay = ctx.attr<double>("weight_decay");
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const T lr = ctx.input(2).data<T>()[0];
    T* const v_data = variable.mutable_data<T>();
    const T* const g_data = gradient.data<T>();
    const auto run = [&](const auto& update) {
      cpu::parallel_for(variable.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        T* __restrict v = v_data;  // a variable and a gradient never share a buffer
        const T* __restrict g = g_data;
        for (int64_t i = begin; i < end; ++i) update.apply(v[i], g[i]);
      });
    };
    if (weight_decay != 0) {
      run(math::GradientDescentUpdate<T, true>{lr, math::decay_factor(lr, weight_decay)});
    } else {
      run(math::GradientDescentUpdate<T, false>{lr});
    }
    return Status();
  });
}

Status apply_momentum_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 2));
  if (update_gated_off(ctx, kMomentumGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  Tensor& accumulator = ctx.input_for_update(1);
  const Tensor& gradient = ctx.input(2);
  const bool nesterov = ctx.attr<bool>("use_nesterov");
  const double weight_decay = ctx.attr<double>("weight_decay");
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const T lr = ctx.input(3).data<T>()[0];
    const T m = static_cast<T>(ctx.attr<double>("momentum"));
    const T decay = math::decay_factor(lr, weight_decay);
    T* const v_data = variable.mutable_data<T>();
    T* const a_data = accumulator.mutable_data<T>();
    const T* const g_data = gradient.data<T>();
    const auto run = [&](const auto& update) {
      cpu::parallel_for(variable.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        // Distinct buffers (a variable, its slot, a gradient), so the loops vectorise.
        T* __restrict v = v_data;
        T* __restrict a = a_data;
        const T* __restrict g = g_data;
        for (int64_t i = begin; i < end; ++i) update.apply(v[i], a[i], g[i]);
      });
    };
    if (weight_decay != 0) {
      nesterov ? run(math::MomentumUpdate<T, true, true>{lr, m, decay}) : run(math::MomentumUpdate<T, false, true>{lr, m, decay});
    } else {
      nesterov ? run(math::MomentumUpdate<T, true>{lr, m}) : run(math::MomentumUpdate<T, false>{lr, m});
    }
    return Status();
  });
}

// Adam's update of n elements, compiled per instruction set (runtime/vector_clones.h): square roots and
// quotients round alike at every vector width, so each clone writes the same bits. The four buffers are
// distinct (a variable, its two slots, a gradient).
template <class T>
[[gnu::always_inline]] inline void adam_range(const math::AdamUpdate<T>& update, T* __restrict v, T* __restrict m1,
                                              T* __restrict m2, const T* __restrict g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) update.apply(v[i], m1[i], m2[i], g[i]);
}
MIRRA_VECTOR_CLONES void adam_update(const math::AdamUpdate<float>& update, float* v, float* m1, float* m2, const float* g,
                                     int64_t n) {
  adam_range(update, v, m1, m2, g, n);
}
MIRRA_VECTOR_CLONES void adam_update(const math::AdamUpdate<double>& update, double* v, double* m1, double* m2, const double* g,
                                     int64_t n) {
  adam_range(update, v, m1, m2, g, n);
}

// Adam (Kingma and Ba) with bias correction, m_hat / (sqrt(v_hat) + epsilon), and AdamW's decoupled
// weight decay (the variable shrinks by learning_rate * weight_decay before the Adam step). `step` is
// the number of updates already applied, so this one is update step + 1.
Status apply_adam_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 3));
  if (update_gated_off(ctx, kAdamGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  Tensor& first_moment = ctx.input_for_update(1);
  Tensor& second_moment = ctx.input_for_update(2);
  const Tensor& gradient = ctx.input(3);
  const double t = static_cast<double>(ctx.input(5).data<int64_t>()[0] + 1);
  const double beta1 = ctx.attr<double>("beta1"), beta2 = ctx.attr<double>("beta2");
  const double correction1 = 1.0 - std::pow(beta1, t), correction2 = 1.0 - std::pow(beta2, t);
  return cpu::visit_dtype<float, double>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    const double lr = static_cast<double>(ctx.input(4).data<T>()[0]);
    const T step_size = static_cast<T>(lr / correction1);
    const T inverse_sqrt_correction2 = static_cast<T>(1.0 / std::sqrt(correction2));
    const T decay = math::decay_factor(static_cast<T>(lr), ctx.attr<double>("weight_decay"));
    const math::AdamUpdate<T> update{static_cast<T>(beta1), static_cast<T>(beta2), step_size, inverse_sqrt_correction2,
                                     decay, static_cast<T>(ctx.attr<double>("epsilon"))};
    T* const v = variable.mutable_data<T>();
    T* const m1 = first_moment.mutable_data<T>();
    T* const m2 = second_moment.mutable_data<T>();
    const T* const g = gradient.data<T>();
    cpu::parallel_for(variable.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      adam_update(update, v + begin, m1 + begin, m2 + begin, g + begin, end - begin);
    });
    return Status();
  });
}

Status assign_add_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 1));
  if (update_gated_off(ctx, kAssignAddGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  return cpu::visit_dtype<float, double, int32_t, int64_t>(variable.dtype(), [&]<class T>(cpu::Type<T>) {
    T* v = variable.mutable_data<T>();
    const T* delta = ctx.input(1).data<T>();
    for (int64_t i = 0; i < variable.num_elements(); ++i) v[i] += delta[i];
    return Status();
  });
}

// The values' elements, in order, become the variable's.
Status assign_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_assigned_parts(ctx));
  Tensor& variable = ctx.input_for_update(0);
  auto* to = static_cast<std::byte*>(variable.mutable_raw_data());
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor& part = ctx.input(i);
    if (part.byte_size() > 0) std::memcpy(to, part.raw_data(), part.byte_size());
    to += part.byte_size();
  }
  return Status();
}

Status no_op_kernel(KernelContext&) { return Status(); }

// The optional gate, when the node has it: a bool scalar.
Status check_gate(const InferContext& ctx, size_t gate) {
  if (ctx.num_inputs() <= gate) return Status();
  if (ctx.input(gate).dtype != DType::boolean || ctx.input(gate).shape.rank() != 0) {
    return ctx.error("the gate must be a bool scalar");
  }
  return Status();
}

// Inputs 0..gate-2 are the variable, its slots and its gradient (same dtype and shape); gate-1 is a
// scalar learning rate of that dtype; then the optional gate.
graph::InferFn infer_apply(size_t gate) {
  return [gate](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
    MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
    for (size_t i = 1; i < gate; ++i) {
      if (ctx.input(i).dtype != ctx.input(0).dtype) return ctx.error("operand " + std::to_string(i) + " must have the variable's dtype");
      if (i + 1 < gate && !ctx.input(i).shape.compatible_with(ctx.input(0).shape)) {
        return ctx.error("operand " + std::to_string(i) + " must have the variable's shape");
      }
    }
    if (ctx.input(gate - 1).shape.rank() != 0) return ctx.error("the learning rate must be a scalar");
    MIRRA_RETURN_IF_ERROR(check_gate(ctx, gate));
    return std::vector<TensorType>{};
  };
}


// ApplyAdam: (variable, m, v, gradient) of one floating dtype and the variable's shape, a scalar
// learning rate of that dtype, and the int64 scalar count of updates done so far.
Expected<std::vector<TensorType>> infer_apply_adam(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.input(i).dtype != ctx.input(0).dtype) return ctx.error("operand " + std::to_string(i) + " must have the variable's dtype");
    if (i < 4 && !ctx.input(i).shape.compatible_with(ctx.input(0).shape)) {
      return ctx.error("operand " + std::to_string(i) + " must have the variable's shape");
    }
  }
  if (ctx.input(4).shape.rank() != 0) return ctx.error("the learning rate must be a scalar");
  if (ctx.input(5).dtype != DType::i64 || ctx.input(5).shape.rank() != 0) return ctx.error("the step must be an i64 scalar");
  MIRRA_RETURN_IF_ERROR(check_gate(ctx, kAdamGate));
  return std::vector<TensorType>{};
}

// AssignAdd and Assign: a value of the variable's dtype and shape.
Status check_assigned_value(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
  if (ctx.input(1).dtype != ctx.input(0).dtype) return ctx.error("the value must have the variable's dtype");
  if (!ctx.input(1).shape.compatible_with(ctx.input(0).shape)) return ctx.error("the value must have the variable's shape");
  return Status();
}

Expected<std::vector<TensorType>> infer_assign_add(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_assigned_value(ctx));
  MIRRA_RETURN_IF_ERROR(check_gate(ctx, kAssignAddGate));
  return std::vector<TensorType>{};
}

// One value of the variable's dtype and shape, or several whose elements add up to the variable's.
Expected<std::vector<TensorType>> infer_assign(const InferContext& ctx) {
  if (ctx.num_inputs() == 2) MIRRA_RETURN_IF_ERROR(check_assigned_value(ctx));
  std::optional<int64_t> elements = 0;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype != ctx.input(0).dtype) return ctx.error("the values must have the variable's dtype");
    const std::optional<int64_t> n = ctx.input(i).shape.num_elements();
    elements = elements && n ? std::optional(*elements + *n) : std::nullopt;
  }
  if (elements && elements != ctx.input(0).shape.num_elements()) {
    return ctx.error("the values hold " + std::to_string(*elements) + " elements, the variable " +
                     std::to_string(ctx.input(0).shape.num_elements().value_or(-1)));
  }
  return std::vector<TensorType>{};
}

}  // namespace

void register_optimizer_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "ApplyGradientDescent",
                              .inputs = {"variable", "gradient", "learning_rate", "apply"},
                              .optional_inputs = 1,
                              .attrs = {{"weight_decay", AttrType::real, 0.0}},
                              .updates = {0},
                              .update_gradient = 1,
                              .infer = infer_apply(kGradientDescentGate),
                              .summary = "variable -= learning_rate * gradient, in place, after variable *= 1 - "
                                         "learning_rate * weight_decay (decoupled weight decay, SGDW); nothing when "
                                         "the optional bool apply is false.",
                              .no_gradient = "it updates state and outputs nothing"});
  // The learning rate (and Adam's step, and the gates) stay in the device's memory, where the kernels
  // read them when they run: the host never waits for them, and a captured step reads each replay's.
  kernels.add("ApplyGradientDescent", graph::DeviceKind::cpu, {apply_gradient_descent_kernel});
  schemas.add(graph::OpSchema{.name = "ApplyMomentum",
                              .inputs = {"variable", "accumulator", "gradient", "learning_rate", "apply"},
                              .optional_inputs = 1,
                              .attrs = {{"momentum", AttrType::real, {}},
                                        {"use_nesterov", AttrType::boolean, false},
                                        {"weight_decay", AttrType::real, 0.0},
                                        {"lazy", AttrType::boolean, false}},
                              .updates = {0, 1},
                              .update_gradient = 2,
                              .infer = infer_apply(kMomentumGate),
                              .summary = "accumulator = momentum * accumulator + gradient; variable -= learning_rate * "
                                         "accumulator (Nesterov: learning_rate * (gradient + momentum * accumulator)), "
                                         "after variable *= 1 - learning_rate * weight_decay (decoupled weight decay, "
                                         "SGDW); nothing when the optional bool apply is false. lazy: an embedding table's "
                                         "update changes the rows looked up alone (ops/sparse_updates.h).",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("ApplyMomentum", graph::DeviceKind::cpu, {apply_momentum_kernel});
  schemas.add(graph::OpSchema{.name = "ApplyAdam",
                              .inputs = {"variable", "m", "v", "gradient", "learning_rate", "step", "apply"},
                              .optional_inputs = 1,
                              .attrs = {{"beta1", AttrType::real, 0.9},
                                        {"beta2", AttrType::real, 0.999},
                                        {"epsilon", AttrType::real, 1e-7},
                                        {"weight_decay", AttrType::real, 0.0},
                                        {"lazy", AttrType::boolean, false}},
                              .updates = {0, 1, 2},
                              .update_gradient = 3,
                              .infer = infer_apply_adam,
                              .summary = "Adam with bias correction; with weight_decay, AdamW's decoupled decay first. step "
                                         "counts the updates already applied; nothing when the optional bool apply is "
                                         "false. lazy: an embedding table's update changes the rows looked up alone "
                                         "(LazyAdam; ops/sparse_updates.h).",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("ApplyAdam", graph::DeviceKind::cpu, {apply_adam_kernel});
  schemas.add(graph::OpSchema{.name = "AssignAdd",
                              .inputs = {"variable", "value", "apply"},
                              .optional_inputs = 1,
                              .updates = {0},
                              .infer = infer_assign_add,
                              .summary = "variable += value, in place (step counters; nothing when the optional bool "
                                         "apply is false).",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("AssignAdd", graph::DeviceKind::cpu, {assign_add_kernel});
  schemas.add(graph::OpSchema{.name = "Assign",
                              .inputs = {"variable", "values"},
                              .variadic = true,
                              .updates = {0},
                              .infer = infer_assign,
                              .summary = "variable = value, in place; with several values, their elements in order "
                                         "(sharded optimizer state joins every replica's updated share).",
                              .no_gradient = "it updates state and outputs nothing"});
  kernels.add("Assign", graph::DeviceKind::cpu, {assign_kernel});
  schemas.add(graph::OpSchema{.name = "NoOp",
                              .infer = [](const InferContext&) -> Expected<std::vector<TensorType>> {
                                return std::vector<TensorType>{};
                              },
                              .cost = graph::costs_nothing,
                              .summary = "Does nothing; its control inputs make it a target that runs them.",
                              .no_gradient = "it has no inputs"});
  kernels.add("NoOp", graph::DeviceKind::cpu, {no_op_kernel});
}

namespace {

// `inputs`, then the gate when there is one.
std::vector<ValueRef> gated(std::vector<ValueRef> inputs, ValueRef apply) {
  if (apply.valid()) inputs.push_back(apply);
  return inputs;
}

}  // namespace

NodeId apply_gradient_descent(Builder& b, ValueRef variable, ValueRef gradient, ValueRef learning_rate,
                              double weight_decay, ValueRef apply) {
  return b.add({.op = "ApplyGradientDescent",
                .inputs = gated({variable, gradient, learning_rate}, apply),
                .attrs = {{"weight_decay", weight_decay}}});
}

NodeId apply_momentum(Builder& b, ValueRef variable, ValueRef accumulator, ValueRef gradient, ValueRef learning_rate,
                      const MomentumSettings& settings, ValueRef apply) {
  return b.add({.op = "ApplyMomentum",
                .inputs = gated({variable, accumulator, gradient, learning_rate}, apply),
                .attrs = {{"momentum", settings.momentum},
                          {"use_nesterov", settings.nesterov},
                          {"weight_decay", settings.weight_decay},
                          {"lazy", settings.lazy}}});
}

NodeId apply_adam(Builder& b, const AdamOperands& operands, const AdamSettings& settings, ValueRef apply) {
  return b.add({.op = "ApplyAdam",
                .inputs = gated({operands.variable, operands.m, operands.v, operands.gradient, operands.learning_rate,
                                 operands.step},
                                apply),
                .attrs = {{"beta1", settings.beta1},
                          {"beta2", settings.beta2},
                          {"epsilon", settings.epsilon},
                          {"weight_decay", settings.weight_decay},
                          {"lazy", settings.lazy}}});
}

NodeId assign_add(Builder& b, ValueRef variable, ValueRef value, ValueRef apply) {
  return b.add({.op = "AssignAdd", .inputs = gated({variable, value}, apply)});
}

NodeId assign(Builder& b, ValueRef variable, ValueRef value) { return assign(b, variable, std::vector<ValueRef>{value}); }

NodeId assign(Builder& b, ValueRef variable, const std::vector<ValueRef>& parts) {
  std::vector<ValueRef> inputs = {variable};
  inputs.insert(inputs.end(), parts.begin(), parts.end());
  return b.add({.op = "Assign", .inputs = std::move(inputs)});
}

std::map<std::string, int64_t> optimizer_slot_bytes(runtime::Session& session) {
  std::map<std::string, int64_t> bytes;
  const graph::Graph& g = session.graph();
  for (const graph::Node& node : g.nodes()) {
    // An update's slots are its inputs between the variable (input 0) and the gradient.
    const graph::OpSchema* schema = registry().find(node.op);
    const std::optional<size_t> gradient_input = schema != nullptr ? schema->update_gradient : std::nullopt;
    for (size_t i = 1; gradient_input && i < *gradient_input; ++i) {
      const graph::Node& slot = g.node(node.inputs[i].node);
      const std::optional<runtime::Tensor> value = session.variables().find(slot.name);
      if (!value) continue;
      bytes[slot.device ? slot.device->to_string() : "cpu:0"] += static_cast<int64_t>(value->byte_size());
    }
  }
  return bytes;
}

NodeId no_op(Builder& b, std::string_view name, std::vector<NodeId> after) {
  return b.add({.op = "NoOp", .name = std::string(name), .control_inputs = std::move(after)});
}

}  // namespace mirra::ops
