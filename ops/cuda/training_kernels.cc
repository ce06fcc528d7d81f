// GPU kernels of the training ops, host side: SparseSoftmaxCrossEntropyWithLogits, the optimizer
// updates (learning rate and Adam's step are host-memory arguments, read here and passed by value) and
// Assign (a device-to-device copy on the stream).
#include <cmath>

#include "ops/cuda/gpu_kernel.h"
#include "ops/kernel_shapes.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

Status sparse_xent_kernel(KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  const int64_t batch = logits.dim(0), classes = logits.dim(1);
  MIRRA_RETURN_IF_ERROR(check_labels(logits, labels));
  Tensor& loss = ctx.allocate_output(0, logits.dtype(), TensorShape{batch});
  Tensor& backprop = ctx.allocate_output(1, logits.dtype(), logits.shape());
  return launched(sparse_softmax_cross_entropy(logits.dtype(), labels.dtype(), logits.raw_data(), labels.raw_data(),
                                               loss.mutable_raw_data(), backprop.mutable_raw_data(), batch, classes,
                                               stream_of(ctx)),
                  "sparse_softmax_cross_entropy");
}

// A host-memory scalar of the variable's floating dtype.
double host_scalar(const Tensor& t) {
  return t.dtype() == DType::f32 ? static_cast<double>(t.data<float>()[0]) : t.data<double>()[0];
}

Status apply_gradient_descent_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 1));
  if (update_gated_off(ctx, kGradientDescentGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  return launched(apply_gradient_descent(variable.dtype(), variable.mutable_raw_data(), ctx.input(1).raw_data(),
                                         host_scalar(ctx.input(2)), variable.num_elements(), stream_of(ctx)),
                  "apply_gradient_descent");
}

Status apply_momentum_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 2));
  if (update_gated_off(ctx, kMomentumGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  Tensor& accumulator = ctx.input_for_update(1);
  return launched(apply_momentum(variable.dtype(), variable.mutable_raw_data(), accumulator.mutable_raw_data(),
                                 ctx.input(2).raw_data(), host_scalar(ctx.input(3)), ctx.attr<double>("momentum"),
                                 ctx.attr<bool>("use_nesterov"), variable.num_elements(), stream_of(ctx)),
                  "apply_momentum");
}

// As the CPU kernel: bias corrections from the step in double, folded into the update's constants.
Status apply_adam_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 3));
  if (update_gated_off(ctx, kAdamGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  const double t = static_cast<double>(ctx.input(5).data<int64_t>()[0] + 1);
  const double beta1 = ctx.attr<double>("beta1"), beta2 = ctx.attr<double>("beta2");
  const double lr = host_scalar(ctx.input(4));
  const AdamParameters parameters{.beta1 = beta1,
                                  .beta2 = beta2,
                                  .step_size = lr / (1.0 - std::pow(beta1, t)),
                                  .inverse_sqrt_correction2 = 1.0 / std::sqrt(1.0 - std::pow(beta2, t)),
                                  .decay = 1.0 - lr * ctx.attr<double>("weight_decay"),
                                  .epsilon = ctx.attr<double>("epsilon")};
  return launched(apply_adam(variable.dtype(), variable.mutable_raw_data(), ctx.input_for_update(1).mutable_raw_data(),
                             ctx.input_for_update(2).mutable_raw_data(), ctx.input(3).raw_data(), parameters,
                             variable.num_elements(), stream_of(ctx)),
                  "apply_adam");
}

Status assign_add_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 1));
  if (update_gated_off(ctx, kAssignAddGate)) return Status();
  Tensor& variable = ctx.input_for_update(0);
  return launched(assign_add(variable.dtype(), variable.mutable_raw_data(), ctx.input(1).raw_data(), variable.num_elements(),
                             stream_of(ctx)),
                  "assign_add");
}

// The values' elements, in order, become the variable's: one copy each on the stream.
Status assign_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_assigned_parts(ctx));
  auto* to = static_cast<std::byte*>(ctx.input_for_update(0).mutable_raw_data());
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor& part = ctx.input(i);
    if (part.byte_size() == 0) continue;
    MIRRA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(to, part.raw_data(), part.byte_size(), cudaMemcpyDeviceToDevice, stream_of(ctx)));
    to += part.byte_size();
  }
  return Status();
}

}  // namespace

void register_gpu_training_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64});
  kernels.add("SparseSoftmaxCrossEntropyWithLogits", DeviceKind::gpu, {.fn = sparse_xent_kernel, .dtypes = floats});
  kernels.add("ApplyGradientDescent", DeviceKind::gpu,
              {.fn = apply_gradient_descent_kernel, .host_memory_inputs = (1u << 2) | (1u << kGradientDescentGate)});
  kernels.add("ApplyMomentum", DeviceKind::gpu,
              {.fn = apply_momentum_kernel, .host_memory_inputs = (1u << 3) | (1u << kMomentumGate)});
  kernels.add("ApplyAdam", DeviceKind::gpu,
              {.fn = apply_adam_kernel, .host_memory_inputs = (1u << 4) | (1u << 5) | (1u << kAdamGate)});
  kernels.add("AssignAdd", DeviceKind::gpu, {.fn = assign_add_kernel, .host_memory_inputs = 1u << kAssignAddGate});
  kernels.add("Assign", DeviceKind::gpu, {assign_kernel});
}

}  // namespace mirra::ops::cuda
