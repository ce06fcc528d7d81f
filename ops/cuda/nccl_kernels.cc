// AllReduce, ReduceScatter and AllGather on GPUs: each rank calls the session's "nccl" communicator
// (runtime/cuda/nccl_communicator.cc: NCCL as a peer library, its ranks meeting, issued in one group
// call and watched by runtime::PeerMeetings) with its GPU, on whose communication stream NCCL runs,
// so the backward pass goes on beside it on the compute stream. Ranks that share one GPU's memory sum
// there (collective_kernels.cc); ranks of several workers are not NCCL's yet (the plan puts
// collectives across workers on the host).
#include <chrono>
#include <memory>
#include <vector>

#include "ops/cuda/gpu_kernel.h"
#include "runtime/allocator.h"
#include "runtime/collectives/communicator.h"
#include "runtime/stream.h"

namespace mirra::ops::cuda {

namespace {

// What NCCL does not serve: ranks across workers; gathers and scatters among ranks sharing a GPU.
Status check_nccl_serves(const KernelContext& ctx) {
  if (ctx.attr<int64_t>("workers") != 1) {
    return graph::unimplemented("'" + ctx.node().name + "' spans workers, which GPUs do not yet (no NCCL across workers)");
  }
  if (ctx.attr<bool>("shared_memory")) {
    return graph::unimplemented("'" + ctx.node().name + "': " + ctx.node().op + " among ranks sharing one GPU's memory");
  }
  return Status();
}

// The rank's call of its group's execution this step, on its GPU.
runtime::CollectiveCall rank_call(const KernelContext& ctx) {
  return {.group = ctx.attr<std::string>("group"),
          .instance = ctx.collective_instance(),
          .participant = static_cast<int>(ctx.attr<int64_t>("rank")),
          .group_size = static_cast<int>(ctx.attr<int64_t>("ranks")),
          .device = &ctx.device(),
          .deadline = runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms")))};
}

runtime::Reduction reduction_of(const KernelContext& ctx) {
  return ctx.attr<std::string>("reduction") == "mean" ? runtime::Reduction::mean : runtime::Reduction::sum;
}

// A rank's tensors, held until its call is done (the outputs are the node's, set before the call).
struct RankTensors {
  std::vector<Tensor> inputs, outputs;
};

// Starts the rank's call through the session's "nccl" communicator; the kernel is done when the call is.
template <class Start>
void call_nccl(KernelContext& ctx, std::shared_ptr<RankTensors> tensors, Start start, runtime::KernelDone done) {
  auto nccl = ctx.communicator("nccl");
  if (!nccl.ok()) return done(nccl.status());
  start(**nccl, rank_call(ctx), *tensors)->then([tensors, done = std::move(done)](Status status) { done(std::move(status)); });
}

// The outputs a rank's calls write on its GPU's communication stream are allocated for that stream,
// from the blocks freed there (a block freed by a compute kernel at the end of its launch may still be
// in use by work queued on the compute stream, which the communication stream does not wait for).
runtime::ScopedAllocationStream allocating_for_communication(const KernelContext& ctx) {
  return runtime::ScopedAllocationStream(&gpu_of(ctx).communication_stream());
}

// This rank's bucket, summed in place where the executor allows (by NCCL), or with its peers on this
// GPU (shared memory).
void all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (ctx.attr<bool>("shared_memory")) return shared_memory_all_reduce(ctx, std::move(done));
  auto tensors = std::make_shared<RankTensors>();
  {
    const runtime::ScopedAllocationStream allocating = allocating_for_communication(ctx);
    for (size_t j = 0; j < ctx.num_inputs(); ++j) {
      tensors->inputs.push_back(ctx.input(j));
      tensors->outputs.push_back(ctx.output_in_place_of_input(j));
    }
  }
  const runtime::Reduction reduction = reduction_of(ctx);
  call_nccl(ctx, std::move(tensors), [reduction](runtime::Communicator& nccl, const runtime::CollectiveCall& call, RankTensors& t) {
    return nccl.all_reduce(call, reduction, t.inputs, t.outputs);
  }, std::move(done));
}

// This rank's share (runtime::participant_share, rank order) of each tensor's flattened sum.
void reduce_scatter_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (Status served = check_nccl_serves(ctx); !served.ok()) return done(served);
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  auto tensors = std::make_shared<RankTensors>();
  {
    const runtime::ScopedAllocationStream allocating = allocating_for_communication(ctx);
    for (size_t j = 0; j < ctx.num_inputs(); ++j) {
      const Tensor& input = ctx.input(j);
      tensors->inputs.push_back(input);
      tensors->outputs.push_back(
          ctx.allocate_output(j, input.dtype(), {runtime::participant_share(input.num_elements(), ranks, rank)}));
    }
  }
  const runtime::Reduction reduction = reduction_of(ctx);
  call_nccl(ctx, std::move(tensors), [reduction](runtime::Communicator& nccl, const runtime::CollectiveCall& call, RankTensors& t) {
    return nccl.reduce_scatter(call, reduction, t.inputs, t.outputs);
  }, std::move(done));
}

// Every rank's rows of each tensor (`rows` of them), joined in rank order.
void all_gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (Status served = check_nccl_serves(ctx); !served.ok()) return done(served);
  const auto& rows = ctx.attr<std::vector<int64_t>>("rows");
  auto tensors = std::make_shared<RankTensors>();
  {
    const runtime::ScopedAllocationStream allocating = allocating_for_communication(ctx);
    for (size_t j = 0; j < ctx.num_inputs(); ++j) {
      const Tensor& part = ctx.input(j);
      if (part.rank() == 0) {
        return done(graph::invalid_argument("'" + ctx.node().name + "': input " + std::to_string(j) + " has no rows"));
      }
      TensorShape shape = part.shape();
      shape.set_dim(0, rows[j]);
      tensors->inputs.push_back(part);
      tensors->outputs.push_back(ctx.allocate_output(j, part.dtype(), shape));
    }
  }
  call_nccl(ctx, std::move(tensors), [](runtime::Communicator& nccl, const runtime::CollectiveCall& call, RankTensors& t) {
    return nccl.all_gather(call, t.inputs, t.outputs);
  }, std::move(done));
}

}  // namespace

void register_gpu_nccl_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({graph::DType::f32, graph::DType::f64});
  // bf16 (compressed gradients): NCCL adds them pairwise, rounding each partial sum to bf16.
  const uint32_t summable = floats | runtime::dtype_mask({graph::DType::bf16});
  // A replay of a recorded step would wait for NCCL's peers with no deadline (a stuck rank hangs it in
  // cudaStreamSynchronize), and no machine with several GPUs has run one yet: steps with NCCL are not
  // recorded.
  const char* no_deadline_in_replays = "meets its peers through NCCL, which a replay would wait for with no deadline";
  kernels.add("AllReduce", graph::DeviceKind::gpu,
              {.expensive = true, .reuses_inputs = true, .async_fn = all_reduce_kernel, .dtypes = summable,
               .not_capturable = no_deadline_in_replays, .collective = true});
  kernels.add("ReduceScatter", graph::DeviceKind::gpu,
              {.expensive = true, .async_fn = reduce_scatter_kernel, .dtypes = floats,
               .not_capturable = no_deadline_in_replays, .collective = true});
  kernels.add("AllGather", graph::DeviceKind::gpu,
              {.expensive = true, .async_fn = all_gather_kernel, .not_capturable = no_deadline_in_replays,
               .collective = true});
}

}  // namespace mirra::ops::cuda
