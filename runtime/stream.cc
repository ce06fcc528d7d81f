// Events, the inline stream, the worker-thread stream and its step captures.
#include "runtime/stream.h"

#include <cstdio>
#include <exception>

namespace mirra::runtime {

bool Event::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void Event::wait() const {
  std::unique_lock lock(mutex_);
  completed_.wait(lock, [this] { return done_; });
}

void Event::then(std::function<void()> callback) {
  {
    std::lock_guard lock(mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

void Event::complete() {
  // Callbacks run before the event reads as done, so whoever waits for it sees their effects; one
  // registered while they run joins the next round.
  for (;;) {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mutex_);
      if (callbacks_.empty()) {
        done_ = true;
        break;
      }
      callbacks.swap(callbacks_);
    }
    for (auto& callback : callbacks) callback();
  }
  completed_.notify_all();
}

void Event::reset() {
  std::lock_guard lock(mutex_);
  done_ = false;
}

std::shared_ptr<Event> Stream::record() {
  auto event = std::make_shared<Event>();
  enqueue([event] { event->complete(); });
  return event;
}

void Stream::wait(std::shared_ptr<Event> event) {
  enqueue([event = std::move(event)] { event->wait(); });
}

void Stream::synchronize() {
  if (recording()) {
    throw DeviceError(graph::failed_precondition(
        "a host wait for a stream that a captured step is being recorded on would never return (its work runs only "
        "in replays)"));
  }
  record()->wait();
}

std::unique_ptr<StepCapture> Stream::capture(const std::vector<Stream*>&) { return nullptr; }

namespace {

// Worker streams' recordings: a replay makes the recorded events pending again, then has each stream
// run its recorded work in order; a recorded wait blocks its stream until the event's replay completes
// it, so the streams keep the order they had.
class WorkerStepCapture final : public StepCapture {
 public:
  explicit WorkerStepCapture(std::vector<WorkerStream*> streams)
      : streams_(std::move(streams)), recordings_(streams_.size()) {}
  graph::Status begin() override {
    for (size_t i = 0; i < streams_.size(); ++i) streams_[i]->start_recording(&recordings_[i]);
    return graph::Status();
  }

  graph::Status end() override {
    for (WorkerStream* stream : streams_) stream->stop_recording();
    return graph::Status();
  }

  graph::Status replay() override {
    for (const WorkerStream::Recording& recording : recordings_) {
      for (const auto& event : recording.events) event->reset();
    }
    for (size_t i = 0; i < streams_.size(); ++i) {
      // The stream's whole recording as one piece of work: its thread runs the items in order.
      streams_[i]->enqueue([&recording = recordings_[i]] {
        for (const auto& work : recording.work) work();
      });
    }
    for (WorkerStream* stream : streams_) stream->synchronize();
    return graph::Status();
  }

  bool replays_host_code() const override { return true; }

 private:
  std::vector<WorkerStream*> streams_;
  std::vector<WorkerStream::Recording> recordings_;
};

}  // namespace

WorkerStream::WorkerStream(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}

WorkerStream::~WorkerStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  has_work_.notify_one();
  // The last owner may be work on the stream itself (a buffer freed in stream order that held its
  // allocator, which held the stream): the thread then ends on its own after this work.
  if (std::this_thread::get_id() == thread_.get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void WorkerStream::enqueue(std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    if (recording_ != nullptr) {
      recording_->work.push_back(std::move(work));
      return;
    }
    queue_.push_back(std::move(work));
  }
  has_work_.notify_one();
}

std::shared_ptr<Event> WorkerStream::record() {
  std::shared_ptr<Event> event = Stream::record();
  std::lock_guard lock(mutex_);
  if (recording_ != nullptr) recording_->events.push_back(event);
  return event;
}

std::unique_ptr<StepCapture> WorkerStream::capture(const std::vector<Stream*>& streams) {
  std::optional<std::vector<WorkerStream*>> workers = streams_of_kind<WorkerStream>(streams);
  return workers ? std::make_unique<WorkerStepCapture>(std::move(*workers)) : nullptr;
}

bool WorkerStream::recording() const {
  std::lock_guard lock(mutex_);
  return recording_ != nullptr;
}

void WorkerStream::start_recording(Recording* recording) {
  std::lock_guard lock(mutex_);
  recording_ = recording;
}

void WorkerStream::stop_recording() {
  std::lock_guard lock(mutex_);
  recording_ = nullptr;
}

void WorkerStream::run() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock lock(mutex_);
      has_work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything enqueued has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      work();
    } catch (const std::exception& e) {
      // Work reports its errors through its own callbacks; an escaping exception is a bug.
      std::fprintf(stderr, "mirra: internal error: work on stream %s threw: %s\n", name_.c_str(), e.what());
      std::terminate();
    }
  }
}

}  // namespace mirra::runtime
