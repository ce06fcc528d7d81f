// GPU kernels of the training ops, host side: SparseSoftmaxCrossEntropyWithLogits, the optimizer
// updates (their learning rate, Adam's step and the gate stay in device memory, where the kernels read
// them) and Assign (a device-to-device copy on the stream).
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

// The update's gate in device memory, or null when it has none.
const bool* gate_of(const KernelContext& ctx, size_t gate) {
  return ctx.num_inputs() > gate ? ctx.input(gate).data<bool>() : nullptr;
}

Status apply_gradient_descent_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 1));
  Tensor& variable = ctx.input_for_update(0);
  return launched(apply_gradient_descent(variable.dtype(), variable.mutable_raw_data(), ctx.input(1).raw_data(),
                                         ctx.input(2).raw_data(), gate_of(ctx, kGradientDescentGate),
                                         ctx.attr<double>("weight_decay"), variable.num_elements(), stream_of(ctx)),
                  "apply_gradient_descent");
}

Status apply_momentum_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 2));
  Tensor& variable = ctx.input_for_update(0);
  Tensor& accumulator = ctx.input_for_update(1);
  return launched(apply_momentum(variable.dtype(), variable.mutable_raw_data(), accumulator.mutable_raw_data(),
                                 ctx.input(2).raw_data(), ctx.input(3).raw_data(), gate_of(ctx, kMomentumGate),
                                 {.momentum = ctx.attr<double>("momentum"),
                                  .nesterov = ctx.attr<bool>("use_nesterov"),
                                  .weight_decay = ctx.attr<double>("weight_decay")},
                                 variable.num_elements(), stream_of(ctx)),
                  "apply_momentum");
}

Status apply_adam_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 3));
  Tensor& variable = ctx.input_for_update(0);
  const AdamParameters parameters{.beta1 = ctx.attr<double>("beta1"),
                                  .beta2 = ctx.attr<double>("beta2"),
                                  .weight_decay = ctx.attr<double>("weight_decay"),
                                  .epsilon = ctx.attr<double>("epsilon")};
  return launched(apply_adam(variable.dtype(), variable.mutable_raw_data(), ctx.input_for_update(1).mutable_raw_data(),
                             ctx.input_for_update(2).mutable_raw_data(), ctx.input(3).raw_data(), ctx.input(4).raw_data(),
                             ctx.input(5).data<int64_t>(), gate_of(ctx, kAdamGate), parameters, variable.num_elements(),
                             stream_of(ctx)),
                  "apply_adam");
}

Status assign_add_kernel(KernelContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, 1));
  Tensor& variable = ctx.input_for_update(0);
  return launched(assign_add(variable.dtype(), variable.mutable_raw_data(), ctx.input(1).raw_data(),
                             gate_of(ctx, kAssignAddGate), variable.num_elements(), stream_of(ctx)),
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
  kernels.add("ApplyGradientDescent", DeviceKind::gpu, {apply_gradient_descent_kernel});
  kernels.add("ApplyMomentum", DeviceKind::gpu, {apply_momentum_kernel});
  kernels.add("ApplyAdam", DeviceKind::gpu, {apply_adam_kernel});
  kernels.add("AssignAdd", DeviceKind::gpu, {assign_add_kernel});
  kernels.add("Assign", DeviceKind::gpu, {assign_kernel});
}

}  // namespace mirra::ops::cuda
