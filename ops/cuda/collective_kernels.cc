// AllReduce among ranks that share this GPU's memory (replicas on logical GPUs of one GPU, the plan
// placing every rank's node on the leader's device, `shared_memory`): the ranks meet at a Rendezvous
// keyed by (session, group, instance); the last to arrive launches one reduction kernel per tensor over
// every rank's buffers on its GPU's communication stream, so the compute stream goes on with the
// backward pass, and every rank completes once the GPU has run it. No transport: NCCL serves ranks on
// different GPUs (nccl_kernels.cc, whose AllReduce kernel hands shared-memory ranks here).
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ops/cuda/gpu_kernel.h"
#include "runtime/allocator.h"
#include "runtime/collectives/rendezvous.h"

namespace mirra::ops::cuda {

namespace {

// One rank's buffers, by tensor of its bucket.
struct SharedPart {
  const runtime::cuda::GpuDevice* gpu = nullptr;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor*> outputs;
  bool mean = false;
  std::function<void(Status)> done;
};

// The meetings of every session of this process, and the sessions whose abandoned steps they follow.
// Never destroyed: CUDA may already be torn down when static destructors run.
struct SharedMeetings {
  runtime::Rendezvous<SharedPart> rendezvous{"rank"};
  std::mutex mutex;
  std::set<const void*> observed;

  // A step the session abandoned fails its meetings now, not at their deadline.
  void observe(const void* session, const runtime::CommunicatorSet& communicators) {
    {
      std::lock_guard lock(mutex);
      if (!observed.insert(session).second) return;
    }
    struct Forget {
      SharedMeetings* meetings;
      const void* session;
      ~Forget() {
        meetings->rendezvous.forget(session);
        std::lock_guard lock(meetings->mutex);
        meetings->observed.erase(session);
      }
    };
    communicators.observe_abandoned([forget = std::make_shared<Forget>(Forget{this, session})](
                                        const runtime::CollectiveInstance& which, const Status& why) {
      forget->meetings->rendezvous.abandon({forget->session, which.group, which.instance}, why);
    });
  }
};

SharedMeetings& shared_meetings() {
  static auto* meetings = new SharedMeetings();
  return *meetings;
}

// Rank r's tensor j against rank 0's, worded as the in-process collective words it.
Status check_same_type(const Tensor& value, const Tensor& first, size_t rank) {
  if (value.dtype() == first.dtype() && value.shape() == first.shape()) return Status();
  return graph::invalid_argument("rank " + std::to_string(rank) + " holds " + value.type_string() + " where rank 0 holds " +
                                 first.type_string());
}

// The last rank's work: every tensor's sum over the ranks, launched on its GPU's communication stream;
// every rank completes when the GPU has run the sums.
void reduce_parts(std::vector<SharedPart> parts) {
  const auto fail_all = [&](const Status& status) {
    for (SharedPart& part : parts) part.done(status);
  };
  const SharedPart& first = parts.front();
  for (size_t r = 1; r < parts.size(); ++r) {
    if (parts[r].inputs.size() != first.inputs.size() || parts[r].gpu != first.gpu) {
      return fail_all(graph::invalid_argument("rank " + std::to_string(r) + " brings another bucket, or another device's, than rank 0"));
    }
  }
  const cudaStream_t stream = first.gpu->gpu_communication_stream().handle();
  std::vector<const void*> inputs(parts.size());
  std::vector<void*> outputs(parts.size());
  for (size_t j = 0; j < first.inputs.size(); ++j) {
    for (size_t r = 0; r < parts.size(); ++r) {
      if (Status same = check_same_type(*parts[r].inputs[j], *first.inputs[j], r); !same.ok()) return fail_all(same);
      inputs[r] = parts[r].inputs[j]->raw_data();
      outputs[r] = parts[r].outputs[j]->mutable_raw_data();
    }
    const Tensor& x = *first.inputs[j];
    if (Status launch = launched(sum_over_replicas(x.dtype(), inputs.data(), outputs.data(), static_cast<int>(parts.size()),
                                                   first.mean, x.num_elements(), stream),
                                 "sum_over_replicas");
        !launch.ok()) {
      return fail_all(launch);
    }
  }
  auto shared = std::make_shared<std::vector<SharedPart>>(std::move(parts));
  shared->front().gpu->gpu_communication_stream().when_device_done([shared](Status status) {
    for (SharedPart& part : *shared) part.done(status);
  });
}

}  // namespace

void shared_memory_all_reduce(KernelContext& ctx, runtime::KernelDone done) {
  // Outputs written on the communication stream are allocated for it.
  const runtime::ScopedAllocationStream allocating(&gpu_of(ctx).communication_stream());
  SharedPart part{.gpu = &gpu_of(ctx), .mean = ctx.attr<std::string>("reduction") == "mean", .done = std::move(done)};
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    part.inputs.push_back(&input);
    part.outputs.push_back(&ctx.allocate_output(j, input.dtype(), input.shape()));
  }
  const void* session = &ctx.resources();
  SharedMeetings& meetings = shared_meetings();
  meetings.observe(session, ctx.resources().communicators);
  const std::string& group = ctx.attr<std::string>("group");
  const int64_t instance = ctx.collective_instance();
  const std::string what = "AllReduce '" + group + "' (instance " + std::to_string(instance) + ")";
  auto parts = meetings.rendezvous.arrive({session, group, instance}, what, static_cast<int>(ctx.attr<int64_t>("rank")),
                                          static_cast<int>(ctx.attr<int64_t>("ranks")),
                                          runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms"))),
                                          std::move(part));
  if (parts) reduce_parts(std::move(*parts));
}

}  // namespace mirra::ops::cuda
