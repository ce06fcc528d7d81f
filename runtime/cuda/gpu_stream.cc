// GpuStream: launching in enqueue order, CUDA events, and the completion thread.
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

void GpuStream::wait(std::shared_ptr<Event> event) {
  if (event->done()) return;
  std::lock_guard lock(launch_mutex_);
  (void)cudaSetDevice(ordinal_);
  if (const auto* gpu_event = dynamic_cast<const GpuEvent*>(event.get())) {
    // In the device's queue: nothing blocks on the host.
    if (check(cudaStreamWaitEvent(stream_, gpu_event->handle(), 0), "cudaStreamWaitEvent").ok()) return;
  }
  // A host event (a CPU stream's): the CUDA stream waits in a host function for it.
  auto* held = new std::shared_ptr<Event>(std::move(event));
  const cudaError_t result = cudaLaunchHostFunc(
      stream_,
      [](void* data) {
        std::unique_ptr<std::shared_ptr<Event>> waited(static_cast<std::shared_ptr<Event>*>(data));
        (*waited)->wait();
      },
      held);
  if (result != cudaSuccess) {
    // Not queued: wait here instead, so the order still holds.
    std::unique_ptr<std::shared_ptr<Event>> waited(held);
    (*waited)->wait();
  }
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
