// PeerAllReduce, PeerReduceScatter and PeerAllGather on GPUs through NCCL. The ranks of a group (one
// node per GPU) meet on the host at a Rendezvous (runtime/collectives/rendezvous.h), which fails the
// ranks of a meeting some rank did not come to by the deadline, naming it, and those of a step that
// failed elsewhere (the session's collectives tell of it). Once the last has arrived one issuing thread makes every rank's
// NCCL calls in one group call: one thread launching for several GPUs must, or NCCL may block on the
// first rank waiting for the others. The issuing thread is NcclPeers' own, not the last rank's: that
// one is launching on its GPU's compute stream and holds that stream, while issuing touches every
// GPU's streams, so two ranks issuing two meetings at once could each wait for the other's stream.
// An all-reduce is ncclAllReduce; a reduce-scatter, whose shares may differ by one element
// (ncclReduceScatter takes equal ones), is one ncclReduce per rank's share, rooted at that rank; an
// all-gather is ncclAllGather when the shares are equal, else one ncclBroadcast per share.
// Each runs on its GPU's communication stream, so the backward pass goes on beside it on the compute
// stream. One communicator per set of GPUs (ncclCommInitAll), made at the first meeting and kept for
// the process. A rank completes once its GPU has finished its calls. A watchdog aborts the
// communicators of an issued meeting whose deadline passed or whose communicator reported an error,
// so the step fails naming the group and the GPUs instead of hanging; the next meeting makes new
// communicators.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "graph/check.h"
#include "ops/cuda/gpu_kernel.h"
#include "runtime/collectives/rendezvous.h"
#include "runtime/stream.h"

namespace mirra::ops::cuda {

namespace {

using Clock = std::chrono::steady_clock;

Status nccl_status(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status();
  return graph::internal_error(what + " failed: " + ncclGetErrorString(result) + " (" + ncclGetLastError(nullptr) + ")");
}

// Issues one rank's NCCL calls, inside the meeting's group call, on `stream` with `comm`.
using RankLaunch = std::function<Status(ncclComm_t comm, cudaStream_t stream)>;

// One rank's part, on its GPU's communication stream.
struct Rank {
  const runtime::cuda::GpuDevice* gpu = nullptr;
  int physical = 0;
  RankLaunch launch;
  // An output not in place of its input is a buffer just allocated, which work still queued on the
  // compute stream may use until it runs (the allocator frees in the order the compute stream runs
  // its kernels): the communication stream then waits for that work first.
  bool allocated_outputs = false;
  Clock::time_point deadline = Clock::time_point::max();
  runtime::KernelDone done;
};

// The communicators of one set of GPUs, rank r's on the r-th.
struct Communicators {
  std::vector<int> gpus;
  std::vector<ncclComm_t> comms;
};

// A group's execution for one step, from the last arrival until every rank completed.
struct Meeting {
  std::string what;  // "PeerAllReduce 'all_reduce/bucket_0' (step 7) over gpu:0, gpu:2"
  std::vector<Rank> ranks;
  Clock::time_point deadline = Clock::time_point::max();
  std::shared_ptr<Communicators> communicators;  // set when issued
  std::atomic<int> remaining{0};                 // ranks whose GPU has not finished
  std::mutex mutex;
  Status failure;  // set by the watchdog before it aborts
};

// What every PeerAllReduce on GPUs in this process shares: the meetings in progress, the
// communicators by GPU set, and the watchdog. Never destroyed: NCCL and CUDA may already be torn
// down when static destructors run.
class NcclPeers {
 public:
  static NcclPeers& instance() {
    static NcclPeers* peers = new NcclPeers();
    return *peers;
  }

  // Rank `rank` of `ranks` arrives; the last issues the meeting. Keyed by the session, the group
  // and the step, so sessions and steps never meet each other.
  void arrive(const void* session, const std::string& op, const std::string& group, int64_t step, int rank, int ranks,
              Rank part, Clock::time_point deadline) {
    part.deadline = deadline;
    const std::string what = op + " '" + group + "' (step " + std::to_string(step) + ")";
    std::optional<std::vector<Rank>> parts = meetings_.arrive({session, group, step}, what, rank, ranks, deadline, std::move(part));
    if (!parts) return;
    auto complete = std::make_shared<Meeting>();
    complete->what = what;
    for (const Rank& r : *parts) complete->deadline = std::min(complete->deadline, r.deadline);
    complete->ranks = std::move(*parts);
    issuer_.enqueue([this, complete] { issue(complete); });
  }

  // Has NcclPeers hear of `session`'s failed steps (through `collectives`, its collective set) and
  // forget the session when the set goes, whose address a later session may have.
  void observe(const void* session, const runtime::CollectiveSet& collectives) {
    {
      std::lock_guard lock(mutex_);
      if (!observed_.insert(session).second) return;
    }
    struct Forget {
      const void* session;
      ~Forget() { NcclPeers::instance().forget(session); }
    };
    collectives.observe_abandoned([forget = std::make_shared<Forget>(Forget{session})](int64_t step, const Status& why) {
      NcclPeers::instance().abandon(forget->session, step, why);
    });
  }

  // The session's step `step` failed elsewhere: the ranks waiting in its meetings fail with `why`
  // now, and its ranks still to come when they arrive, instead of at the deadline.
  void abandon(const void* session, int64_t step, const Status& why) { meetings_.abandon(session, step, why); }

  // The session is gone: what was kept of its steps goes too.
  void forget(const void* session) {
    {
      std::lock_guard lock(mutex_);
      observed_.erase(session);
    }
    meetings_.forget(session);
  }

 private:
  NcclPeers() = default;

  // Every rank's calls in one NCCL group, each on its GPU's communication stream; then each rank
  // completes when its GPU has run them. On the issuing thread: one meeting issues at a time, so
  // every GPU's stream receives the meetings' calls in the same order.
  void issue(const std::shared_ptr<Meeting>& meeting) {
    std::vector<int> gpus;
    std::string devices;
    for (const Rank& rank : meeting->ranks) {
      gpus.push_back(rank.physical);
      devices += (devices.empty() ? " over " : ", ") + rank.gpu->id().to_string();
    }
    meeting->what += devices;
    auto communicators = communicators_for(gpus);
    Status status = communicators.ok() ? Status() : communicators.status();
    if (status.ok()) {
      meeting->communicators = *communicators;
      for (const Rank& rank : meeting->ranks) {
        if (rank.allocated_outputs) rank.gpu->gpu_communication_stream().wait(rank.gpu->gpu_stream().record());
      }
      status = nccl_status(ncclGroupStart(), "ncclGroupStart");
      for (size_t r = 0; status.ok() && r < meeting->ranks.size(); ++r) {
        const Rank& rank = meeting->ranks[r];
        status = rank.launch((*communicators)->comms[r], rank.gpu->gpu_communication_stream().handle());
      }
      const Status ended = nccl_status(ncclGroupEnd(), "ncclGroupEnd");
      if (status.ok()) status = ended;
    }
    if (!status.ok()) {
      if (communicators.ok()) abort(*communicators);
      for (Rank& rank : meeting->ranks) rank.done(status.with_context(meeting->what));
      return;
    }
    meeting->remaining = static_cast<int>(meeting->ranks.size());
    watch(meeting);
    for (Rank& rank : meeting->ranks) {
      rank.gpu->gpu_communication_stream().when_device_done([meeting, done = std::move(rank.done)](Status device) {
        Status status;
        {
          std::lock_guard lock(meeting->mutex);
          status = meeting->failure.ok() ? std::move(device) : meeting->failure;
        }
        meeting->remaining.fetch_sub(1);
        done(status.ok() ? status : status.with_context(meeting->what));
      });
    }
  }

  // The set's communicators, made on first use (one per GPU, rank r on gpus[r]).
  graph::Expected<std::shared_ptr<Communicators>> communicators_for(const std::vector<int>& gpus) {
    std::lock_guard lock(mutex_);
    auto& found = communicators_[gpus];
    if (found) return found;
    std::vector<int> sorted = gpus;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      communicators_.erase(gpus);
      return graph::invalid_argument("NCCL takes one rank per GPU; the ranks share a GPU");
    }
    auto made = std::make_shared<Communicators>();
    made->gpus = gpus;
    made->comms.resize(gpus.size());
    const Status status = nccl_status(ncclCommInitAll(made->comms.data(), static_cast<int>(gpus.size()), gpus.data()),
                                      "ncclCommInitAll");
    if (!status.ok()) {
      communicators_.erase(gpus);
      return status;
    }
    found = made;
    return made;
  }

  // Aborting makes NCCL's kernels return, so the streams move on; the set gets new communicators
  // at its next meeting.
  void abort(const std::shared_ptr<Communicators>& communicators) {
    {
      std::lock_guard lock(mutex_);
      auto it = communicators_.find(communicators->gpus);
      if (it != communicators_.end() && it->second == communicators) communicators_.erase(it);
    }
    for (ncclComm_t comm : communicators->comms) (void)ncclCommAbort(comm);
  }

  void watch(const std::shared_ptr<Meeting>& meeting) {
    std::lock_guard lock(mutex_);
    watched_.push_back(meeting);
    start_watchdog();
  }

  // REQUIRES: mutex_ held.
  void start_watchdog() {
    if (!watchdog_.joinable()) watchdog_ = std::thread([this] { run_watchdog(); });
    wake_.notify_one();
  }

  // Every 50 ms: issued meetings done are dropped; one whose communicators report an error, or
  // whose deadline passed, fails and has its communicators aborted.
  void run_watchdog() {
    constexpr auto kPoll = std::chrono::milliseconds(50);
    std::unique_lock lock(mutex_);
    for (;;) {
      if (watched_.empty()) {
        wake_.wait(lock, [this] { return !watched_.empty(); });
      } else {
        wake_.wait_for(lock, kPoll);
      }
      std::vector<std::pair<std::shared_ptr<Meeting>, Status>> failed;
      const auto now = Clock::now();
      for (auto it = watched_.begin(); it != watched_.end();) {
        const std::shared_ptr<Meeting>& meeting = *it;
        if (meeting->remaining.load() == 0) {
          it = watched_.erase(it);
          continue;
        }
        Status problem;
        for (ncclComm_t comm : meeting->communicators->comms) {
          ncclResult_t async = ncclSuccess;
          if (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
            problem = nccl_status(async, "NCCL");
            break;
          }
        }
        if (problem.ok() && now > meeting->deadline) {
          problem = graph::deadline_exceeded("not finished by its deadline; the NCCL communicators were aborted");
        }
        if (problem.ok()) {
          ++it;
          continue;
        }
        failed.emplace_back(meeting, problem);
        it = watched_.erase(it);
      }
      lock.unlock();
      for (auto& [meeting, problem] : failed) {
        {
          std::lock_guard meeting_lock(meeting->mutex);
          meeting->failure = problem;
        }
        abort(meeting->communicators);
      }
      lock.lock();
    }
  }

  std::mutex mutex_;
  runtime::Rendezvous<Rank> meetings_{"rank"};  // by (session, group, step), until the last rank arrives
  runtime::WorkerStream issuer_{"NCCL issue"};  // issues the meetings, in the order they complete
  std::set<const void*> observed_;  // sessions whose failed steps NcclPeers hears of
  std::map<std::vector<int>, std::shared_ptr<Communicators>> communicators_;
  std::vector<std::shared_ptr<Meeting>> watched_;
  std::condition_variable wake_;
  std::thread watchdog_;
};

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

// GPUs sum among themselves; a mean (the sum scaled after) is not built.
Status check_sum(const KernelContext& ctx) {
  if (ctx.attr<std::string>("reduction") == "sum") return Status();
  return graph::unimplemented("'" + ctx.node().name + "': GPUs sum among themselves; a mean is not built");
}

// The rank's part joins its group's meeting for this step.
void arrive(KernelContext& ctx, Rank part, runtime::KernelDone done) {
  const runtime::cuda::GpuDevice& gpu = gpu_of(ctx);
  part.gpu = &gpu;
  part.physical = gpu.physical_ordinal();
  part.done = std::move(done);
  const void* session = &ctx.resources();
  NcclPeers::instance().observe(session, ctx.resources().collectives);
  const int64_t timeout_ms = ctx.attr<int64_t>("timeout_ms");
  const Clock::time_point deadline =
      timeout_ms > 0 ? Clock::now() + std::chrono::milliseconds(timeout_ms) : Clock::time_point::max();
  NcclPeers::instance().arrive(session, ctx.node().op, ctx.attr<std::string>("group"), ctx.step_id(),
                               static_cast<int>(ctx.attr<int64_t>("rank")), static_cast<int>(ctx.attr<int64_t>("ranks")),
                               std::move(part), deadline);
}

// This rank's bucket, summed in place where the executor allows.
void peer_all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (Status sum = check_sum(ctx); !sum.ok()) return done(std::move(sum));
  struct Buffer {
    const void* input;
    void* output;
    size_t count;
    ncclDataType_t type;
  };
  std::vector<Buffer> buffers;
  Rank part;
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    void* output = ctx.output_in_place_of_input(j).mutable_raw_data();
    buffers.push_back({input.raw_data(), output, static_cast<size_t>(input.num_elements()), nccl_type(input.dtype())});
    part.allocated_outputs = part.allocated_outputs || output != input.raw_data();
  }
  part.launch = [buffers = std::move(buffers)](ncclComm_t comm, cudaStream_t stream) {
    for (const Buffer& b : buffers) {
      MIRRA_RETURN_IF_ERROR(nccl_status(ncclAllReduce(b.input, b.output, b.count, b.type, ncclSum, comm, stream), "ncclAllReduce"));
    }
    return Status();
  };
  arrive(ctx, std::move(part), std::move(done));
}

// This rank's share of each tensor's sum: rank q's share (runtime::participant_share, rank order) is
// reduced to rank q by one ncclReduce, every rank taking part in every rank's.
void peer_reduce_scatter_kernel(KernelContext& ctx, runtime::KernelDone done) {
  if (Status sum = check_sum(ctx); !sum.ok()) return done(std::move(sum));
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  struct Buffer {
    const std::byte* input;
    void* share;
    int64_t elements;
    size_t element_size;
    ncclDataType_t type;
  };
  std::vector<Buffer> buffers;
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    const int64_t elements = input.num_elements();
    Tensor& share = ctx.allocate_output(j, input.dtype(), {runtime::participant_share(elements, ranks, rank)});
    buffers.push_back({static_cast<const std::byte*>(input.raw_data()), share.mutable_raw_data(), elements,
                       graph::dtype_size(input.dtype()), nccl_type(input.dtype())});
  }
  Rank part{.allocated_outputs = !buffers.empty()};
  part.launch = [buffers = std::move(buffers), rank, ranks](ncclComm_t comm, cudaStream_t stream) {
    for (const Buffer& b : buffers) {
      int64_t first = 0;
      for (int64_t root = 0; root < ranks; ++root) {
        const int64_t count = runtime::participant_share(b.elements, ranks, root);
        const std::byte* sent = b.input + static_cast<size_t>(first) * b.element_size;
        // Only the root's receive buffer is written; the others pass their send buffer in its place.
        void* received = root == rank ? b.share : const_cast<std::byte*>(sent);
        if (count > 0) {
          MIRRA_RETURN_IF_ERROR(nccl_status(
              ncclReduce(sent, received, static_cast<size_t>(count), b.type, ncclSum, static_cast<int>(root), comm, stream),
              "ncclReduce"));
        }
        first += count;
      }
    }
    return Status();
  };
  arrive(ctx, std::move(part), std::move(done));
}

// Every rank's share of each tensor, joined in rank order: ncclAllGather when the shares are equal,
// else rank q's share broadcast from rank q into its place. Bytes are copied, whatever the dtype.
void peer_all_gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  const auto& elements = ctx.attr<std::vector<int64_t>>("elements");
  struct Buffer {
    const void* share;
    std::byte* gathered;
    int64_t elements;
    size_t element_size;
  };
  std::vector<Buffer> buffers;
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& share = ctx.input(j);
    Tensor& gathered = ctx.allocate_output(j, share.dtype(), {elements[j]});
    buffers.push_back({share.raw_data(), static_cast<std::byte*>(gathered.mutable_raw_data()), elements[j],
                       graph::dtype_size(share.dtype())});
  }
  Rank part{.allocated_outputs = !buffers.empty()};
  part.launch = [buffers = std::move(buffers), rank, ranks](ncclComm_t comm, cudaStream_t stream) {
    for (const Buffer& b : buffers) {
      if (b.elements % ranks == 0) {
        const size_t bytes = static_cast<size_t>(b.elements / ranks) * b.element_size;
        if (bytes > 0) {
          MIRRA_RETURN_IF_ERROR(nccl_status(ncclAllGather(b.share, b.gathered, bytes, ncclUint8, comm, stream), "ncclAllGather"));
        }
        continue;
      }
      int64_t first = 0;
      for (int64_t root = 0; root < ranks; ++root) {
        const int64_t count = runtime::participant_share(b.elements, ranks, root);
        std::byte* place = b.gathered + static_cast<size_t>(first) * b.element_size;
        // Only the root's send buffer is read; the others pass their place in its stead.
        const void* sent = root == rank ? b.share : place;
        if (count > 0) {
          MIRRA_RETURN_IF_ERROR(nccl_status(ncclBroadcast(sent, place, static_cast<size_t>(count) * b.element_size,
                                                          ncclUint8, static_cast<int>(root), comm, stream),
                                            "ncclBroadcast"));
        }
        first += count;
      }
    }
    return Status();
  };
  arrive(ctx, std::move(part), std::move(done));
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
  kernels.add("PeerAllReduce", graph::DeviceKind::gpu,
              {.expensive = true, .reuses_inputs = true, .async_fn = peer_all_reduce_kernel, .dtypes = summable,
               .not_capturable = no_deadline_in_replays});
  kernels.add("PeerReduceScatter", graph::DeviceKind::gpu,
              {.expensive = true, .async_fn = peer_reduce_scatter_kernel, .dtypes = floats,
               .not_capturable = no_deadline_in_replays});
  kernels.add("PeerAllGather", graph::DeviceKind::gpu,
              {.expensive = true, .async_fn = peer_all_gather_kernel, .not_capturable = no_deadline_in_replays});
}

}  // namespace mirra::ops::cuda
