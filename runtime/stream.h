// Streams and events: a device runs its work in order on a stream. An Event marks a point in a
// stream; it completes when the work enqueued before it has run, and other streams (wait) or the
// host (wait, then) can order themselves after it. InlineStream runs work at once on the caller's
// thread (the CPU device); WorkerStream runs it in order on a thread of its own (the cpu_async
// device, and the model of a GPU stream); runtime/cuda/gpu_stream.h is the GPU's.
//
//   device.compute_stream().enqueue([&] { ... });
//   auto done = device.compute_stream().record();
//   done->then([] { /* everything enqueued before has run */ });
//
// A StepCapture records what a step enqueues on a set of streams and runs it again as a whole later
// (Stream::capture; on GPUs a CUDA graph): Note [Captured steps] in runtime/executor.h.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "graph/status.h"

namespace mirra::runtime {

class Event {
 public:
  virtual ~Event() = default;
  bool done() const;
  // Blocks until the event completes.
  void wait() const;
  // Runs `callback` when the event completes, on the completing thread (or now, when it has); the
  // event reads as done only after the callbacks registered before it completed have run.
  void then(std::function<void()> callback);
  // Completes the event; called once, by the stream (once per replay, for an event of a recording).
  void complete();
  // Makes a completed event pending again, for a replay of the recording it belongs to; nothing may
  // wait for it or hold callbacks on it meanwhile.
  void reset();

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable completed_;
  bool done_ = false;
  std::vector<std::function<void()>> callbacks_;
};

// A device failure where no Status can be returned (a copy, a kernel's allocation, a host wait for
// a stream); the executor and the session turn it back into its status.
class DeviceError : public std::runtime_error {
 public:
  explicit DeviceError(graph::Status status) : std::runtime_error(status.message()), status_(std::move(status)) {}
  const graph::Status& status() const { return status_; }

 private:
  graph::Status status_;
};

class Stream;

// The work a step enqueues on some streams, recorded between begin() and end() and run again by
// replay(). While recording, work enqueued on the streams is kept, not run (a GPU's launches are
// recorded into a CUDA graph: the host part of a kernel runs, the device part waits for replays), an
// event recorded on one of them is a point in the recording that only replays complete, and a device
// done callback is called at once. Work must therefore not wait on the host for recorded events.
class StepCapture {
 public:
  virtual ~StepCapture() = default;
  virtual graph::Status begin() = 0;
  // Ends the recording; an error says why it cannot be replayed.
  virtual graph::Status end() = 0;
  // Runs the recording once, after the work enqueued on the streams before, and returns when the
  // devices have run it, with the error a device reported.
  virtual graph::Status replay() = 0;
  // Whether a replay runs the recorded work itself again, host code included (worker streams), or
  // only what it launched on the devices (a CUDA graph).
  virtual bool replays_host_code() const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  // True when work runs on another thread than the one that enqueues it.
  virtual bool asynchronous() const = 0;
  // Runs `work` after everything enqueued before it. Work must not throw.
  virtual void enqueue(std::function<void()> work) = 0;

  // An event that completes when the work enqueued so far has run.
  virtual std::shared_ptr<Event> record();
  // Work enqueued later waits for `event` (from any stream) first.
  virtual void wait(std::shared_ptr<Event> event);
  // Blocks the caller until everything enqueued so far has run. While the stream is being recorded
  // that would never happen (what it records completes only in replays): DeviceError instead.
  void synchronize();
  // Whether its work is being recorded into a captured step (StepCapture) now.
  virtual bool recording() const { return false; }
  // Called from work on this stream: runs `callback` once that work and everything before it are
  // complete on the device, with the error the device reported, if any. Work on a CPU stream is
  // complete when it returns (so: at once); work on a GPU stream only launched the device's work.
  virtual void when_device_done(std::function<void(graph::Status)> callback) { callback(graph::Status()); }
  // A capture of `streams` (this one among them), or null when they cannot be recorded together
  // (work on an inline stream runs as it is enqueued; streams of different kinds).
  virtual std::unique_ptr<StepCapture> capture(const std::vector<Stream*>& streams);
};

// `streams` as streams of kind T, or nothing when one is of another kind.
template <class T>
std::optional<std::vector<T*>> streams_of_kind(const std::vector<Stream*>& streams) {
  std::vector<T*> of_kind;
  for (Stream* stream : streams) {
    auto* typed = dynamic_cast<T*>(stream);
    if (typed == nullptr) return std::nullopt;
    of_kind.push_back(typed);
  }
  return of_kind;
}

class InlineStream final : public Stream {
 public:
  bool asynchronous() const override { return false; }
  void enqueue(std::function<void()> work) override { work(); }
};

class WorkerStream final : public Stream {
 public:
  explicit WorkerStream(std::string name);
  // Runs what is still enqueued, then stops the thread.
  ~WorkerStream() override;

  bool asynchronous() const override { return true; }
  void enqueue(std::function<void()> work) override;
  std::shared_ptr<Event> record() override;
  // Worker streams record together: each keeps its work in order, and a replay runs it again.
  std::unique_ptr<StepCapture> capture(const std::vector<Stream*>& streams) override;
  bool recording() const override;

  // What a recording keeps of one stream: its work, and the events recorded on it.
  struct Recording {
    std::vector<std::function<void()>> work;
    std::vector<std::shared_ptr<Event>> events;
  };
  // Work enqueued and events recorded go to `recording` until stop_recording (called when no other
  // thread enqueues).
  void start_recording(Recording* recording);
  void stop_recording();

 private:
  void run();

  std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable has_work_;
  std::deque<std::function<void()>> queue_;
  Recording* recording_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mirra::runtime
