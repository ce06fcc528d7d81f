// AllReduce, ReduceScatter and AllGather on GPUs through NCCL: the ranks meet, issue in
// one group call and are watched by runtime::PeerMeetings (runtime/collectives/peer_meetings.h), to
// which NCCL is the PeerLibrary: one communicator per GPU of a set (ncclCommInitAll), its errors
// (ncclCommGetAsyncError) and its abort (ncclCommAbort). A sum is ncclSum, a mean ncclAvg. An
// all-reduce is ncclAllReduce; a reduce-scatter, whose shares may differ by one element
// (ncclReduceScatter takes equal ones), is one ncclReduce per rank's share, rooted at that rank; an
// all-gather is ncclAllGather when the shares are equal, else one ncclBroadcast per share. Each runs
// on its GPU's communication stream, so the backward pass goes on beside it on the compute stream.
// Ranks that share one GPU's memory sum there (collective_kernels.cc); ranks of several workers are
// not NCCL's yet (the plan puts collectives across workers on the host).
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "graph/check.h"
#include "ops/cuda/gpu_kernel.h"
#include "runtime/allocator.h"
#include "runtime/collectives/peer_meetings.h"
#include "runtime/stream.h"

namespace mirra::ops::cuda {

namespace {

Status nccl_status(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status();
  return graph::internal_error(what + " failed: " + ncclGetErrorString(result) + " (" + ncclGetLastError(nullptr) + ")");
}

// The communicators of one set of GPUs, rank r's on the r-th.
class NcclCommunicators final : public runtime::PeerCommunicators {
 public:
  explicit NcclCommunicators(std::vector<ncclComm_t> comms) : comms_(std::move(comms)) {}

  ncclComm_t comm(size_t rank) const { return comms_[rank]; }

  Status async_error() override {
    for (ncclComm_t comm : comms_) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
        return nccl_status(async, "NCCL");
      }
    }
    return Status();
  }

  void abort() override {
    for (ncclComm_t comm : comms_) (void)ncclCommAbort(comm);
  }

 private:
  std::vector<ncclComm_t> comms_;
};

class Nccl final : public runtime::PeerLibrary {
 public:
  std::string_view name() const override { return "NCCL"; }

  graph::Expected<std::shared_ptr<runtime::PeerCommunicators>> connect(const std::vector<int>& gpus) override {
    std::vector<ncclComm_t> comms(gpus.size());
    MIRRA_RETURN_IF_ERROR(
        nccl_status(ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()), gpus.data()), "ncclCommInitAll"));
    return std::shared_ptr<runtime::PeerCommunicators>(std::make_shared<NcclCommunicators>(std::move(comms)));
  }
  Status group_start() override { return nccl_status(ncclGroupStart(), "ncclGroupStart"); }
  Status group_end() override { return nccl_status(ncclGroupEnd(), "ncclGroupEnd"); }
};

// Every GPU collective of this process meets here. Never destroyed: NCCL and CUDA may already be
// torn down when static destructors run.
runtime::PeerMeetings& nccl_meetings() {
  static auto* meetings = new runtime::PeerMeetings(*new Nccl());
  return *meetings;
}

// Issues one rank's NCCL calls on `comm` and `stream`.
using RankLaunch = std::function<Status(ncclComm_t comm, cudaStream_t stream)>;

// The outputs a rank's calls write on its GPU's communication stream are allocated for that stream,
// from the blocks freed there (a block freed by a compute kernel at the end of its launch may still be
// in use by work queued on the compute stream, which the communication stream does not wait for).
runtime::ScopedAllocationStream allocating_for_communication(const KernelContext& ctx) {
  return runtime::ScopedAllocationStream(&gpu_of(ctx).communication_stream());
}

ncclDataType_t nccl_type(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::f32: return ncclFloat32;
    case graph::DType::f64: return ncclFloat64;
    case graph::DType::bf16: return ncclBfloat16;
    default: break;  // the kernels' dtype lists keep the others on the CPU
  }
  MIRRA_CHECK(false, "a GPU kernel gave NCCL a dtype its dtype list refuses: " + std::string(graph::dtype_name(dtype)));
  return ncclFloat32;
}

// The reduction NCCL applies: a sum, or a mean (ncclAvg: the sum over the ranks divided by their
// count, as the CPU's collectives take it, up to rounding).
ncclRedOp_t nccl_reduction(const KernelContext& ctx) { return ctx.attr<std::string>("reduction") == "mean" ? ncclAvg : ncclSum; }

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

// The rank's calls join its group's meeting for this step. The executor calls the kernel once its
// GPU has finished the inputs, so the communication stream waits for nothing.
void arrive(KernelContext& ctx, RankLaunch launch, runtime::KernelDone done) {
  const runtime::cuda::GpuDevice* gpu = &gpu_of(ctx);
  runtime::PeerPart part;
  part.device = gpu->id().to_string();
  part.physical = gpu->physical_ordinal();
  part.launch = [gpu, launch = std::move(launch)](runtime::PeerCommunicators& communicators, size_t rank) {
    return launch(static_cast<NcclCommunicators&>(communicators).comm(rank), gpu->gpu_communication_stream().handle());
  };
  part.when_device_done = [gpu](std::function<void(Status)> callback) {
    gpu->gpu_communication_stream().when_device_done(std::move(callback));
  };
  part.deadline = runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms")));
  part.done = std::move(done);
  const void* session = &ctx.resources();
  runtime::PeerMeetings& meetings = nccl_meetings();
  meetings.observe(session, ctx.resources().communicators);
  meetings.arrive(session, ctx.node().op, ctx.attr<std::string>("group"), ctx.collective_instance(),
                  static_cast<int>(ctx.attr<int64_t>("rank")), static_cast<int>(ctx.attr<int64_t>("ranks")), std::move(part));
}

// This rank's bucket, summed in place where the executor allows (by NCCL), or with its peers on this
// GPU (shared memory).
void all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (ctx.attr<bool>("shared_memory")) return shared_memory_all_reduce(ctx, std::move(done));
  const ncclRedOp_t reduction = nccl_reduction(ctx);
  struct Buffer {
    const void* input;
    void* output;
    size_t count;
    ncclDataType_t type;
  };
  std::vector<Buffer> buffers;
  const runtime::ScopedAllocationStream allocating = allocating_for_communication(ctx);
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    void* output = ctx.output_in_place_of_input(j).mutable_raw_data();
    buffers.push_back({input.raw_data(), output, static_cast<size_t>(input.num_elements()), nccl_type(input.dtype())});
  }
  RankLaunch launch = [buffers = std::move(buffers), reduction](ncclComm_t comm, cudaStream_t stream) {
    for (const Buffer& b : buffers) {
      MIRRA_RETURN_IF_ERROR(nccl_status(ncclAllReduce(b.input, b.output, b.count, b.type, reduction, comm, stream), "ncclAllReduce"));
    }
    return Status();
  };
  arrive(ctx, std::move(launch), std::move(done));
}

// This rank's share of each tensor's sum: rank q's share (runtime::participant_share, rank order) is
// reduced to rank q by one ncclReduce, every rank taking part in every rank's.
void reduce_scatter_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (Status served = check_nccl_serves(ctx); !served.ok()) return done(served);
  const ncclRedOp_t reduction = nccl_reduction(ctx);
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  struct Buffer {
    const std::byte* input;
    void* share;
    int64_t elements;
    size_t element_size;
    ncclDataType_t type;
  };
  std::vector<Buffer> buffers;
  const runtime::ScopedAllocationStream allocating = allocating_for_communication(ctx);
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    const int64_t elements = input.num_elements();
    Tensor& share = ctx.allocate_output(j, input.dtype(), {runtime::participant_share(elements, ranks, rank)});
    buffers.push_back({static_cast<const std::byte*>(input.raw_data()), share.mutable_raw_data(), elements,
                       graph::dtype_size(input.dtype()), nccl_type(input.dtype())});
  }
  RankLaunch launch = [buffers = std::move(buffers), rank, ranks, reduction](ncclComm_t comm, cudaStream_t stream) {
    for (const Buffer& b : buffers) {
      int64_t first = 0;
      for (int64_t root = 0; root < ranks; ++root) {
        const int64_t count = runtime::participant_share(b.elements, ranks, root);
        const std::byte* sent = b.input + static_cast<size_t>(first) * b.element_size;
        // Only the root's receive buffer is written; the others pass their send buffer in its place.
        void* received = root == rank ? b.share : const_cast<std::byte*>(sent);
        if (count > 0) {
          MIRRA_RETURN_IF_ERROR(nccl_status(
              ncclReduce(sent, received, static_cast<size_t>(count), b.type, reduction, static_cast<int>(root), comm, stream),
              "ncclReduce"));
        }
        first += count;
      }
    }
    return Status();
  };
  arrive(ctx, std::move(launch), std::move(done));
}

// Every rank's rows of each tensor, joined in rank order: ncclAllGather when the ranks' rows are
// equal, else rank q's rows broadcast from rank q into their place. Bytes are copied, whatever the dtype.
void all_gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (Status served = check_nccl_serves(ctx); !served.ok()) return done(served);
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  const auto& rows = ctx.attr<std::vector<int64_t>>("rows");
  struct Buffer {
    const void* part;
    std::byte* gathered;
    int64_t rows;
    size_t row_bytes;
  };
  std::vector<Buffer> buffers;
  const runtime::ScopedAllocationStream allocating = allocating_for_communication(ctx);
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& part = ctx.input(j);
    if (part.rank() == 0 || part.dim(0) != runtime::participant_share(rows[j], ranks, rank)) {
      return done(graph::invalid_argument("'" + ctx.node().name + "': input " + std::to_string(j) + " " + part.type_string() +
                                          " is not its rank's rows of " + std::to_string(rows[j])));
    }
    TensorShape shape = part.shape();
    shape.set_dim(0, rows[j]);
    Tensor& gathered = ctx.allocate_output(j, part.dtype(), shape);
    const size_t row_bytes = part.dim(0) > 0 ? part.byte_size() / static_cast<size_t>(part.dim(0))
                                             : gathered.byte_size() / static_cast<size_t>(std::max<int64_t>(rows[j], 1));
    buffers.push_back({part.raw_data(), static_cast<std::byte*>(gathered.mutable_raw_data()), rows[j], row_bytes});
  }
  RankLaunch launch = [buffers = std::move(buffers), rank, ranks](ncclComm_t comm, cudaStream_t stream) {
    for (const Buffer& b : buffers) {
      if (b.rows % ranks == 0) {
        const size_t bytes = static_cast<size_t>(b.rows / ranks) * b.row_bytes;
        if (bytes > 0) {
          MIRRA_RETURN_IF_ERROR(nccl_status(ncclAllGather(b.part, b.gathered, bytes, ncclUint8, comm, stream), "ncclAllGather"));
        }
        continue;
      }
      int64_t first = 0;
      for (int64_t root = 0; root < ranks; ++root) {
        const int64_t count = runtime::participant_share(b.rows, ranks, root);
        std::byte* place = b.gathered + static_cast<size_t>(first) * b.row_bytes;
        // Only the root's send buffer is read; the others pass their place in its stead.
        const void* sent = root == rank ? b.part : place;
        if (count > 0) {
          MIRRA_RETURN_IF_ERROR(nccl_status(ncclBroadcast(sent, place, static_cast<size_t>(count) * b.row_bytes,
                                                          ncclUint8, static_cast<int>(root), comm, stream),
                                            "ncclBroadcast"));
        }
        first += count;
      }
    }
    return Status();
  };
  arrive(ctx, std::move(launch), std::move(done));
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
