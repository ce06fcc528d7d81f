// Events, the inline stream and the worker-thread stream.
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

std::shared_ptr<Event> Stream::record() {
  auto event = std::make_shared<Event>();
  enqueue([event] { event->complete(); });
  return event;
}

void Stream::wait(std::shared_ptr<Event> event) {
  enqueue([event = std::move(event)] { event->wait(); });
}

void Stream::synchronize() { record()->wait(); }

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
    queue_.push_back(std::move(work));
  }
  has_work_.notify_one();
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
