// GPU kernels of AllReduce, Broadcast and AllGather for replicas that share this GPU: placement
// brings every replica's buffer into its memory, so the node needs no rendezvous and no transport,
// only work on a stream (one reduction kernel, or device-to-device copies). AllReduce runs on the
// GPU's communication stream (KernelDef::on_communication_stream), so the compute stream goes on
// with the backward pass while the sum waits for the other replicas' gradients. Replicas on
// different GPUs or hosts reduce through the session's Communicator on the CPU kernel's path.
#include <cstdint>
#include <vector>

#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;

// Replica r's value against replica 0's, worded as the in-process collective words it.
Status check_same_type(const Tensor& value, const Tensor& first, int64_t replica) {
  if (value.dtype() == first.dtype() && value.shape() == first.shape()) return Status();
  return graph::invalid_argument("participant " + std::to_string(replica) + " holds " + value.type_string() +
                                 " where participant 0 holds " + first.type_string());
}

Status copy_on_device(const KernelContext& ctx, void* to, const void* from, size_t bytes) {
  if (bytes == 0 || to == from) return Status();
  MIRRA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_of(ctx)));
  return Status();
}

// Replica r's bucket is inputs r*k .. r*k+k-1, summed on the communication stream into new outputs
// (a kernel on a stream is never offered its inputs' buffers).
Status all_reduce_kernel(KernelContext& ctx) {
  const cudaStream_t stream = gpu_of(ctx).gpu_communication_stream().handle();
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  const size_t k = ctx.num_inputs() / static_cast<size_t>(replicas);
  const bool mean = ctx.attr<std::string>("reduction") == "mean";
  std::vector<const void*> inputs(static_cast<size_t>(replicas));
  std::vector<void*> outputs(static_cast<size_t>(replicas));
  for (size_t j = 0; j < k; ++j) {
    const Tensor& first = ctx.input(j);
    for (int64_t r = 0; r < replicas; ++r) {
      const size_t i = static_cast<size_t>(r) * k + j;
      const Tensor& input = ctx.input(i);
      MIRRA_RETURN_IF_ERROR(check_same_type(input, first, r));
      Tensor& output = ctx.allocate_output(i, input.dtype(), input.shape());
      inputs[static_cast<size_t>(r)] = input.raw_data();
      outputs[static_cast<size_t>(r)] = output.mutable_raw_data();
    }
    MIRRA_RETURN_IF_ERROR(launched(sum_over_replicas(first.dtype(), inputs.data(), outputs.data(), static_cast<int>(replicas),
                                                     mean, first.num_elements(), stream),
                                   "sum_over_replicas"));
  }
  return Status();
}

// Every replica owns its copy.
Status broadcast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  for (size_t r = 0; r < ctx.num_outputs(); ++r) {
    Tensor& copy = ctx.allocate_output(r, x.dtype(), x.shape());
    MIRRA_RETURN_IF_ERROR(copy_on_device(ctx, copy.mutable_raw_data(), x.raw_data(), x.byte_size()));
  }
  return Status();
}

// For each tensor j of the bucket, every replica's output j is all replicas' j-th rows in replica order.
Status all_gather_kernel(KernelContext& ctx) {
  if (ctx.attr<int64_t>("workers") != 1) {
    return graph::unimplemented("'" + ctx.node().name + "' gathers across workers, which GPUs do not yet (no NCCL across workers)");
  }
  const size_t replicas = static_cast<size_t>(ctx.attr<int64_t>("replicas"));
  const size_t k = ctx.num_inputs() / replicas;
  for (size_t j = 0; j < k; ++j) {
    const Tensor& first = ctx.input(j);
    if (first.rank() == 0) return graph::invalid_argument("cannot gather scalars along dim 0");
    int64_t rows = 0;
    for (size_t q = 0; q < replicas; ++q) {
      const Tensor& input = ctx.input(q * k + j);
      bool stacks = input.dtype() == first.dtype() && input.rank() == first.rank();
      for (int d = 1; stacks && d < input.rank(); ++d) stacks = input.dim(d) == first.dim(d);
      if (!stacks) {
        return graph::invalid_argument("participant " + std::to_string(q) + " holds " + input.type_string() +
                                       ", which does not stack with participant 0's " + first.type_string());
      }
      rows += input.dim(0);
    }
    TensorShape shape = first.shape();
    shape.set_dim(0, rows);
    for (size_t r = 0; r < replicas; ++r) {
      Tensor& gathered = ctx.allocate_output(r * k + j, first.dtype(), shape);
      size_t offset = 0;
      for (size_t q = 0; q < replicas; ++q) {
        const Tensor& input = ctx.input(q * k + j);
        MIRRA_RETURN_IF_ERROR(
            copy_on_device(ctx, static_cast<char*>(gathered.mutable_raw_data()) + offset, input.raw_data(), input.byte_size()));
        offset += input.byte_size();
      }
    }
  }
  return Status();
}

}  // namespace

void register_gpu_collective_kernels(runtime::KernelRegistry& kernels) {
  kernels.add("AllReduce", DeviceKind::gpu,
              {.fn = all_reduce_kernel,
               .dtypes = runtime::dtype_mask({graph::DType::f32, graph::DType::f64, graph::DType::bf16}),
               .on_communication_stream = true});
  kernels.add("Broadcast", DeviceKind::gpu, {broadcast_kernel});
  kernels.add("AllGather", DeviceKind::gpu, {all_gather_kernel});
}

}  // namespace mirra::ops::cuda
