// EventFile: one TensorBoard event file (`events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2` in a
// directory): TFRecord records of Event messages, the first saying the file's version. The calls
// only queue their event; a thread of the writer serialises, frames and writes them, so that a
// training step never waits on the disk. The thread wakes for a batch of events or once every
// `flush_interval`, and flushes what it wrote at least that often; a run killed mid-write leaves a
// file TensorBoard reads up to its last whole record.
//
//   MIRRA_ASSIGN_OR_RETURN(auto file, EventFile::open("runs/cnn/train"));
//   file->scalar("loss", step, 0.42);
//   file->histogram("fc1/w", step, weights);          // binned on the writer's thread
//   MIRRA_RETURN_IF_ERROR(file->close());             // writes the rest; the first write error, if any
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "graph/status.h"
#include "runtime/tensor.h"

namespace mirra::runner::tensorboard {

class Event;

class EventFile {
 public:
  static graph::Expected<std::unique_ptr<EventFile>> open(const std::string& directory,
                                                          std::chrono::milliseconds flush_interval = std::chrono::seconds(2));
  ~EventFile();  // closes
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  const std::string& path() const { return path_; }

  void scalar(const std::string& tag, int64_t step, double value);
  // Scalars that `compute` works out on the writer's thread (from a step's timeline, say), as one event.
  using Scalars = std::vector<std::pair<std::string, double>>;
  void scalars(int64_t step, std::function<Scalars()> compute);
  // A histogram of a host tensor's elements (f32, f64, bf16, f16; the tensor is held until it is binned).
  void histogram(const std::string& tag, int64_t step, runtime::Tensor values);
  // Text (Markdown), as TensorBoard's text dashboard shows it.
  void text(const std::string& tag, int64_t step, const std::string& markdown);
  // A serialized GraphDef (graph_def.h), for the graph dashboard.
  void graph(std::string graph_def);

  // Writes and flushes every event queued, then stops the writer (later calls queue nothing); the
  // first write error, if any.
  graph::Status close();

 private:
  // Fills in an event's content on the writer's thread (its time and step are set already).
  using Content = std::function<void(Event&)>;

  EventFile(std::string path, std::FILE* file, std::chrono::milliseconds flush_interval);
  void queue(int64_t step, Content content);
  void write_loop();
  void write_record(const std::string& record);  // on the writer's thread

  const std::string path_;
  std::FILE* file_;
  const std::chrono::milliseconds flush_interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  struct Pending {
    double wall_time;
    int64_t step;
    Content content;
  };
  std::deque<Pending> pending_;
  // The writer wakes for a batch of this many events, for close, or once per interval.
  static constexpr size_t kBatch = 64;
  bool closing_ = false;
  graph::Status error_;  // the first failed write; later events are dropped
  std::thread writer_;
};

}  // namespace mirra::runner::tensorboard
