// GpuStream: launching in enqueue order, CUDA events, the completion thread, and the capture of
// streams into a CUDA graph.
#include "runtime/cuda/gpu_stream.h"

#include "runtime/cuda/cuda_status.h"
#include "runtime/device.h"

namespace mirra::runtime::cuda {

EventPool::~EventPool() {
  for (cudaEvent_t event : free_) (void)cudaEventDestroy(event);
}

cudaError_t EventPool::take(cudaEvent_t* event) {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      *event = free_.back();
      free_.pop_back();
      return cudaSuccess;
    }
  }
  return cudaEventCreateWithFlags(event, cudaEventDisableTiming | cudaEventBlockingSync);
}

void EventPool::give_back(cudaEvent_t event) {
  std::lock_guard lock(mutex_);
  free_.push_back(event);
}

GpuEvent::~GpuEvent() {
  if (handle_ != nullptr) pool_->give_back(handle_);
}

GpuStream::GpuStream(int ordinal, std::string name) : ordinal_(ordinal), name_(std::move(name)) {
  MIRRA_CUDA_THROW_IF_ERROR(cudaSetDevice(ordinal_));
  MIRRA_CUDA_THROW_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  completion_thread_ = std::thread([this] { complete_in_order(); });
}

GpuStream::~GpuStream() {
  synchronize();
  {
    std::lock_guard lock(pending_mutex_);
    stopping_ = true;
  }
  has_pending_.notify_one();
  completion_thread_.join();
  (void)cudaStreamDestroy(stream_);
}

void GpuStream::enqueue(std::function<void()> work) {
  std::lock_guard lock(launch_mutex_);
  (void)cudaSetDevice(ordinal_);  // the launching thread's current device (cheap when unchanged)
  work();
}

std::shared_ptr<GpuEvent> GpuStream::record_pending(std::function<void(graph::Status)> callback) {
  std::lock_guard lock(launch_mutex_);
  graph::Status status = check(cudaSetDevice(ordinal_), "cudaSetDevice");
  cudaEvent_t handle = nullptr;
  if (status.ok()) status = check(events_->take(&handle), "cudaEventCreateWithFlags");
  if (status.ok()) status = check(cudaEventRecord(handle, stream_), "cudaEventRecord");
  auto event = std::make_shared<GpuEvent>(handle, events_);
  if (capturing_) {
    // A point of the graph: other streams' launches may wait for it; the host never sees it.
    status = status.with_context("stream " + name_);
    keep_capture_error(status);
    if (callback) callback(status);
    return event;
  }
  std::lock_guard pending_lock(pending_mutex_);
  if (!status.ok()) {
    // Nothing to wait for on the device: the completion thread reports the error in order.
    if (device_error_.ok()) device_error_ = status.with_context("stream " + name_);
  }
  pending_.push_back({event, std::move(callback)});
  has_pending_.notify_one();
  return event;
}

std::shared_ptr<Event> GpuStream::record() { return record_pending(nullptr); }

void GpuStream::when_device_done(std::function<void(graph::Status)> callback) { record_pending(std::move(callback)); }

void GpuStream::set_capturing(bool capturing) {
  std::lock_guard lock(launch_mutex_);
  capturing_ = capturing;
  if (capturing) capture_error_ = graph::Status();
}

void GpuStream::keep_capture_error(const graph::Status& status) {
  if (!status.ok() && capture_error_.ok()) capture_error_ = status;
}

bool GpuStream::recording() const {
  std::lock_guard lock(launch_mutex_);
  return capturing_;
}

graph::Status GpuStream::capture_error() {
  std::lock_guard lock(launch_mutex_);
  return capture_error_;
}

void GpuStream::wait(std::shared_ptr<Event> event) {
  if (event->done()) return;
  const auto* gpu_event = dynamic_cast<const GpuEvent*>(event.get());
  if (gpu_event == nullptr) {
    // A host event (a CPU stream's): the host waits now, before it launches what follows. The CUDA
    // stream cannot wait for it in its queue: a host function must not wait for other work (CUDA may
    // run host functions one after another, so a graph mixing CPU streams and GPUs could deadlock),
    // and a graph being recorded cannot wait for the host at all.
    event->wait();
    return;
  }
  std::lock_guard lock(launch_mutex_);
  (void)cudaSetDevice(ordinal_);
  // In the device's queue: nothing blocks on the host.
  const graph::Status queued = check(cudaStreamWaitEvent(stream_, gpu_event->handle(), 0), "cudaStreamWaitEvent");
  if (capturing_) {
    // A recorded event never completes for the host: a wait the graph cannot hold fails the recording.
    keep_capture_error(queued.with_context("stream " + name_));
    return;
  }
  // Not queued: the host waits instead, so the order still holds.
  if (!queued.ok()) event->wait();
}

namespace {

// GPU streams recorded into one CUDA graph: the first stream's capture, which the others join by
// waiting for an event of it (and it for theirs at the end). A replay launches the graph on the first
// stream after the work queued on every stream, and the streams' later work follows the replay.
class CudaGraphCapture final : public StepCapture {
 public:
  explicit CudaGraphCapture(std::vector<GpuStream*> streams) : streams_(std::move(streams)), points_(streams_.size()) {}

  ~CudaGraphCapture() override {
    if (executable_ != nullptr) (void)cudaGraphExecDestroy(executable_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
    for (cudaEvent_t point : points_) {
      if (point != nullptr) (void)cudaEventDestroy(point);
    }
  }

  graph::Status begin() override {
    for (size_t i = 0; i < streams_.size(); ++i) {
      MIRRA_RETURN_IF_ERROR(check(cudaSetDevice(streams_[i]->ordinal()), "cudaSetDevice"));
      MIRRA_RETURN_IF_ERROR(check(cudaEventCreateWithFlags(&points_[i], cudaEventDisableTiming), "cudaEventCreateWithFlags"));
    }
    GpuStream& first = *streams_[0];
    MIRRA_RETURN_IF_ERROR(check(cudaSetDevice(first.ordinal()), "cudaSetDevice"));
    // Relaxed: kernels launch from the executor's threads, and a first allocation may call cudaMalloc.
    MIRRA_RETURN_IF_ERROR(
        check(cudaStreamBeginCapture(first.handle(), cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture"));
    for (GpuStream* stream : streams_) stream->set_capturing(true);
    MIRRA_RETURN_IF_ERROR(check(cudaEventRecord(points_[0], first.handle()), "cudaEventRecord"));
    for (size_t i = 1; i < streams_.size(); ++i) {
      MIRRA_RETURN_IF_ERROR(check(cudaStreamWaitEvent(streams_[i]->handle(), points_[0], 0), "cudaStreamWaitEvent"));
    }
    return graph::Status();
  }

  graph::Status end() override {
    GpuStream& first = *streams_[0];
    graph::Status status;
    for (size_t i = 1; i < streams_.size() && status.ok(); ++i) {
      status = check(cudaSetDevice(streams_[i]->ordinal()), "cudaSetDevice");
      if (status.ok()) status = check(cudaEventRecord(points_[i], streams_[i]->handle()), "cudaEventRecord");
      if (status.ok()) status = check(cudaStreamWaitEvent(first.handle(), points_[i], 0), "cudaStreamWaitEvent");
    }
    (void)cudaSetDevice(first.ordinal());
    const graph::Status ended = check(cudaStreamEndCapture(first.handle(), &graph_), "cudaStreamEndCapture");
    for (GpuStream* stream : streams_) {
      stream->set_capturing(false);
      if (status.ok()) status = stream->capture_error();
    }
    MIRRA_RETURN_IF_ERROR(status);
    MIRRA_RETURN_IF_ERROR(ended);
    return check(cudaGraphInstantiate(&executable_, graph_, 0), "cudaGraphInstantiate");
  }

  graph::Status replay() override {
    GpuStream& first = *streams_[0];
    for (size_t i = 1; i < streams_.size(); ++i) {
      MIRRA_RETURN_IF_ERROR(check(cudaSetDevice(streams_[i]->ordinal()), "cudaSetDevice"));
      MIRRA_RETURN_IF_ERROR(check(cudaEventRecord(points_[i], streams_[i]->handle()), "cudaEventRecord"));
      MIRRA_RETURN_IF_ERROR(check(cudaStreamWaitEvent(first.handle(), points_[i], 0), "cudaStreamWaitEvent"));
    }
    MIRRA_RETURN_IF_ERROR(check(cudaSetDevice(first.ordinal()), "cudaSetDevice"));
    MIRRA_RETURN_IF_ERROR(check(cudaGraphLaunch(executable_, first.handle()), "cudaGraphLaunch"));
    MIRRA_RETURN_IF_ERROR(check(cudaEventRecord(points_[0], first.handle()), "cudaEventRecord"));
    for (size_t i = 1; i < streams_.size(); ++i) {
      MIRRA_RETURN_IF_ERROR(check(cudaStreamWaitEvent(streams_[i]->handle(), points_[0], 0), "cudaStreamWaitEvent"));
    }
    return check(cudaStreamSynchronize(first.handle()), "cudaStreamSynchronize");
  }

  bool replays_host_code() const override { return false; }

 private:
  std::vector<GpuStream*> streams_;
  std::vector<cudaEvent_t> points_;  // one per stream, on its GPU: where it forks from or joins the first
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t executable_ = nullptr;
};

}  // namespace

std::unique_ptr<StepCapture> GpuStream::capture(const std::vector<Stream*>& streams) {
  std::optional<std::vector<GpuStream*>> gpu_streams = streams_of_kind<GpuStream>(streams);
  return gpu_streams ? std::make_unique<CudaGraphCapture>(std::move(*gpu_streams)) : nullptr;
}

void GpuStream::complete_in_order() {
  for (;;) {
    std::deque<Pending> batch;
    {
      std::unique_lock lock(pending_mutex_);
      has_pending_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;
      batch.swap(pending_);
    }
    // The events of one stream complete in the order they were recorded: once the last of the batch
    // has, all have, so one wait serves them all.
    graph::Status status;
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      if (it->event->handle() == nullptr) continue;
      status = check(cudaEventSynchronize(it->event->handle()), "cudaEventSynchronize");
      break;
    }
    {
      std::lock_guard lock(pending_mutex_);
      if (!status.ok() && device_error_.ok()) device_error_ = status.with_context("stream " + name_);
      status = device_error_;
    }
    for (Pending& done : batch) {
      done.event->complete();
      if (done.callback) done.callback(status);
    }
  }
}

}  // namespace mirra::runtime::cuda
