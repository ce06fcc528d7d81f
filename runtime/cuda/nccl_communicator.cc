// NCCL as a peer library (runtime/collectives/peer_meetings.h) and the session's communicator over it
// (PeerCommunicator, named "nccl"): one NCCL communicator per GPU of a set (ncclCommInitAll), its
// errors (ncclCommGetAsyncError) and its abort (ncclCommAbort), and each participant's calls, issued
// on its GPU's communication stream so the backward pass goes on beside them on the compute stream.
// A sum is ncclSum, a mean ncclAvg. An all-reduce is ncclAllReduce; a reduce-scatter, whose shares
// may differ by one element (ncclReduceScatter takes equal ones), is one ncclReduce per participant's
// share, rooted at that participant; an all-gather is ncclAllGather when the shares are equal, else
// one ncclBroadcast per share. The caller allocates the outputs for the communication stream
// (ScopedAllocationStream). Participants of several workers are not NCCL's yet.
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "graph/check.h"
#include "runtime/collectives/peer_communicator.h"
#include "runtime/cuda/gpu_device.h"
#include "runtime/gpu_devices.h"

namespace mirra::runtime {

namespace {

using graph::Status;

Status nccl_status(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status();
  return graph::internal_error(what + " failed: " + ncclGetErrorString(result) + " (" + ncclGetLastError(nullptr) + ")");
}

// The communicators of one set of GPUs, participant r's on the r-th.
class NcclCommunicators final : public PeerCommunicators {
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

// Issues one participant's NCCL calls on `comm` and `stream`.
using Issue = std::function<Status(ncclComm_t comm, cudaStream_t stream)>;

graph::Expected<ncclDataType_t> nccl_type(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::f32: return ncclFloat32;
    case graph::DType::f64: return ncclFloat64;
    case graph::DType::bf16: return ncclBfloat16;
    default: break;
  }
  return graph::invalid_argument("NCCL does not sum " + std::string(graph::dtype_name(dtype)));
}

ncclRedOp_t nccl_reduction(Reduction reduction) { return reduction == Reduction::mean ? ncclAvg : ncclSum; }

class Nccl final : public PeerLibrary {
 public:
  std::string_view name() const override { return "NCCL"; }

  graph::Expected<std::shared_ptr<PeerCommunicators>> connect(const std::vector<int>& gpus) override {
    std::vector<ncclComm_t> comms(gpus.size());
    MIRRA_RETURN_IF_ERROR(
        nccl_status(ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()), gpus.data()), "ncclCommInitAll"));
    return std::shared_ptr<PeerCommunicators>(std::make_shared<NcclCommunicators>(std::move(comms)));
  }
  Status group_start() override { return nccl_status(ncclGroupStart(), "ncclGroupStart"); }
  Status group_end() override { return nccl_status(ncclGroupEnd(), "ncclGroupEnd"); }

  // Each tensor summed into its output (in place where they share a buffer).
  graph::Expected<PeerPart> all_reduce(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                       std::span<Tensor> outputs) override {
    struct Buffer {
      const void* input;
      void* output;
      size_t count;
      ncclDataType_t type;
    };
    std::vector<Buffer> buffers;
    for (size_t j = 0; j < inputs.size(); ++j) {
      MIRRA_ASSIGN_OR_RETURN(const ncclDataType_t type, nccl_type(inputs[j].dtype()));
      buffers.push_back({inputs[j].raw_data(), outputs[j].mutable_raw_data(), static_cast<size_t>(inputs[j].num_elements()), type});
    }
    const ncclRedOp_t op = nccl_reduction(reduction);
    return part_of(call, [buffers = std::move(buffers), op](ncclComm_t comm, cudaStream_t stream) {
      for (const Buffer& b : buffers) {
        MIRRA_RETURN_IF_ERROR(nccl_status(ncclAllReduce(b.input, b.output, b.count, b.type, op, comm, stream), "ncclAllReduce"));
      }
      return Status();
    });
  }

  // Participant q's share of each sum (participant_share, in participant order) reduced to q by one
  // ncclReduce, every participant taking part in every participant's.
  graph::Expected<PeerPart> reduce_scatter(const CollectiveCall& call, Reduction reduction, std::span<const Tensor> inputs,
                                           std::span<Tensor> outputs) override {
    struct Buffer {
      const std::byte* input;
      void* share;
      int64_t elements;
      size_t element_size;
      ncclDataType_t type;
    };
    std::vector<Buffer> buffers;
    for (size_t j = 0; j < inputs.size(); ++j) {
      MIRRA_ASSIGN_OR_RETURN(const ncclDataType_t type, nccl_type(inputs[j].dtype()));
      buffers.push_back({static_cast<const std::byte*>(inputs[j].raw_data()), outputs[j].mutable_raw_data(),
                         inputs[j].num_elements(), graph::dtype_size(inputs[j].dtype()), type});
    }
    const ncclRedOp_t op = nccl_reduction(reduction);
    const int64_t rank = call.participant, ranks = call.group_size;
    return part_of(call, [buffers = std::move(buffers), rank, ranks, op](ncclComm_t comm, cudaStream_t stream) {
      for (const Buffer& b : buffers) {
        int64_t first = 0;
        for (int64_t root = 0; root < ranks; ++root) {
          const int64_t count = participant_share(b.elements, ranks, root);
          const std::byte* sent = b.input + static_cast<size_t>(first) * b.element_size;
          // Only the root's receive buffer is written; the others pass their send buffer in its place.
          void* received = root == rank ? b.share : const_cast<std::byte*>(sent);
          if (count > 0) {
            MIRRA_RETURN_IF_ERROR(nccl_status(
                ncclReduce(sent, received, static_cast<size_t>(count), b.type, op, static_cast<int>(root), comm, stream),
                "ncclReduce"));
          }
          first += count;
        }
      }
      return Status();
    });
  }

  // Every participant's rows of each tensor, joined in participant order: ncclAllGather when the
  // shares are equal, else participant q's rows broadcast from q into their place. Bytes, whatever
  // the dtype.
  graph::Expected<PeerPart> all_gather(const CollectiveCall& call, std::span<const Tensor> inputs,
                                       std::span<Tensor> outputs) override {
    struct Buffer {
      const void* part;
      std::byte* gathered;
      int64_t rows;
      size_t row_bytes;
    };
    std::vector<Buffer> buffers;
    const int64_t rank = call.participant, ranks = call.group_size;
    for (size_t j = 0; j < inputs.size(); ++j) {
      const Tensor& part = inputs[j];
      Tensor& gathered = outputs[j];
      const int64_t rows = gathered.rank() > 0 ? gathered.dim(0) : 0;
      if (part.rank() == 0 || part.dim(0) != participant_share(rows, ranks, rank)) {
        return graph::invalid_argument("all_gather '" + call.group + "': input " + std::to_string(j) + " " + part.type_string() +
                                       " is not participant " + std::to_string(rank) + "'s rows of " + gathered.type_string());
      }
      const size_t row_bytes = gathered.byte_size() / static_cast<size_t>(std::max<int64_t>(rows, 1));
      buffers.push_back({part.raw_data(), static_cast<std::byte*>(gathered.mutable_raw_data()), rows, row_bytes});
    }
    return part_of(call, [buffers = std::move(buffers), rank, ranks](ncclComm_t comm, cudaStream_t stream) {
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
          const int64_t count = participant_share(b.rows, ranks, root);
          std::byte* place = b.gathered + static_cast<size_t>(first) * b.row_bytes;
          // Only the root's send buffer is read; the others pass their place in its stead.
          const void* sent = root == rank ? b.part : place;
          if (count > 0) {
            MIRRA_RETURN_IF_ERROR(nccl_status(ncclBroadcast(sent, place, static_cast<size_t>(count) * b.row_bytes, ncclUint8,
                                                            static_cast<int>(root), comm, stream),
                                              "ncclBroadcast"));
          }
          first += count;
        }
      }
      return Status();
    });
  }

 private:
  // The participant's part on its GPU (call.device): `issue` on the GPU's communication stream, done
  // when the GPU has run it.
  static graph::Expected<PeerPart> part_of(const CollectiveCall& call, Issue issue) {
    const auto* gpu = dynamic_cast<const cuda::GpuDevice*>(call.device);
    if (gpu == nullptr) {
      return graph::invalid_argument("'" + call.group + "': NCCL sums among GPUs, and participant " +
                                     std::to_string(call.participant) + "'s values are not on one");
    }
    PeerPart part;
    part.device = gpu->id().to_string();
    part.physical = gpu->physical_ordinal();
    part.launch = [gpu, issue = std::move(issue)](PeerCommunicators& communicators, size_t rank) {
      return issue(static_cast<NcclCommunicators&>(communicators).comm(rank), gpu->gpu_communication_stream().handle());
    };
    part.when_device_done = [gpu](std::function<void(Status)> callback) {
      gpu->gpu_communication_stream().when_device_done(std::move(callback));
    };
    return part;
  }
};

}  // namespace

std::shared_ptr<Communicator> make_gpu_peer_communicator() {
  // Never destroyed: NCCL and CUDA may already be torn down when static destructors run.
  static auto* library = new Nccl();
  static auto* meetings = new PeerMeetings(*library);
  return std::make_shared<PeerCommunicator>("nccl", *meetings, *library);
}

}  // namespace mirra::runtime
