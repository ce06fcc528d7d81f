// GpuStream: a CUDA stream behind the Stream interface. Work enqueued on it is host code that
// launches device work (kernels, copies, cuBLAS and cuDNN calls) onto the CUDA stream; it runs at
// once on the enqueuing thread, one launcher at a time, with the stream's GPU current, so launches
// keep the order of enqueue and the device keeps the order of launches. Nothing waits for the
// device there: record() gives a GpuEvent (a CUDA event, completed for the host by the stream's
// completion thread), wait() makes the CUDA stream wait for another stream's event (in the device's
// queue when it is a GPU's; a CPU stream's the host waits for before it launches more), and when_device_done() calls back from the completion thread once the
// device reached that point, with the error the device reported. The completion thread waits once for
// the newest event of what is pending and completes everything before it with it.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "runtime/stream.h"

namespace mirra::runtime::cuda {

// A stream's CUDA events, reused: a step records one after every kernel, and creating and
// destroying them each time would be set-up repeated on the hot path. Events are blocking-sync, so
// the completion thread sleeps in cudaEventSynchronize instead of spinning a core.
class EventPool {
 public:
  EventPool() = default;
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  // A free event, or a new one.
  cudaError_t take(cudaEvent_t* event);
  // An event nobody waits on any more.
  void give_back(cudaEvent_t event);

 private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

// A point in a GPU stream: a CUDA event, and the host-side Event that completes after it. The CUDA
// event goes back to its pool with the last reference.
class GpuEvent final : public Event {
 public:
  GpuEvent(cudaEvent_t handle, std::shared_ptr<EventPool> pool) : handle_(handle), pool_(std::move(pool)) {}
  ~GpuEvent() override;
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;
  cudaEvent_t handle() const { return handle_; }

 private:
  cudaEvent_t handle_;
  std::shared_ptr<EventPool> pool_;
};

class GpuStream final : public Stream {
 public:
  // A new non-blocking CUDA stream on GPU `ordinal`; throws DeviceError when CUDA refuses.
  GpuStream(int ordinal, std::string name);
  // Waits for the device to finish the stream's work, then stops the completion thread.
  ~GpuStream() override;

  bool asynchronous() const override { return true; }
  void enqueue(std::function<void()> work) override;
  std::shared_ptr<Event> record() override;
  void wait(std::shared_ptr<Event> event) override;
  void when_device_done(std::function<void(graph::Status)> callback) override;
  std::unique_ptr<StepCapture> capture(const std::vector<Stream*>& streams) override;
  bool recording() const override;

  cudaStream_t handle() const { return stream_; }
  int ordinal() const { return ordinal_; }
  // Whether its launches are being recorded into a CUDA graph (set by the capture).
  void set_capturing(bool capturing);
  // What failed on it while it recorded (an event it could not record or wait for), if anything.
  graph::Status capture_error();

 private:
  // The first failure while recording (under launch_mutex_): it fails the recording.
  void keep_capture_error(const graph::Status& status);

  // A recorded event the completion thread waits for, and who to tell.
  struct Pending {
    std::shared_ptr<GpuEvent> event;
    std::function<void(graph::Status)> callback;  // may be empty
  };
  // Records a GpuEvent now, and queues it for the completion thread.
  std::shared_ptr<GpuEvent> record_pending(std::function<void(graph::Status)> callback);
  void complete_in_order();

  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<EventPool> events_ = std::make_shared<EventPool>();
  mutable std::recursive_mutex launch_mutex_;  // recursive: launching work may free a buffer, which may record
  std::mutex pending_mutex_;
  std::condition_variable has_pending_;
  std::deque<Pending> pending_;
  graph::Status device_error_;  // the first error the device reported; every later completion carries it
  bool capturing_ = false;      // under launch_mutex_
  graph::Status capture_error_;  // under launch_mutex_
  bool stopping_ = false;
  std::thread completion_thread_;
};

}  // namespace mirra::runtime::cuda
