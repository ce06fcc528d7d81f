// Streams and events: a device runs its work in order on a stream. An Event marks a point in a
// stream; it completes when the work enqueued before it has run, and other streams (wait) or the
// host (wait, then) can order themselves after it. InlineStream runs work at once on the caller's
// thread (the CPU device); WorkerStream runs it in order on a thread of its own (the cpu_async
// device, and the model of a GPU stream); runtime/cuda/gpu_stream.h is the GPU's.
//
//   device.compute_stream().enqueue([&] { ... });
//   auto done = device.compute_stream().record();
//   done->then([] { /* everything enqueued before has run */ });
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
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
  // Completes the event; called once, by the stream.
  void complete();

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable completed_;
  bool done_ = false;
  std::vector<std::function<void()>> callbacks_;
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
  // Blocks the caller until everything enqueued so far has run.
  void synchronize();
  // Called from work on this stream: runs `callback` once that work and everything before it are
  // complete on the device, with the error the device reported, if any. Work on a CPU stream is
  // complete when it returns (so: at once); work on a GPU stream only launched the device's work.
  virtual void when_device_done(std::function<void(graph::Status)> callback) { callback(graph::Status()); }
};

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

 private:
  void run();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable has_work_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mirra::runtime
