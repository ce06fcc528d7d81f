// EventFile: the queue, the writer's thread and TFRecord's framing of each Event.
#include "tools/mirra/tensorboard/event_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/data/tfrecord_framing.h"
#include "tools/mirra/tensorboard/histogram.h"
#include "tools/mirra/tensorboard/summary.pb.h"

namespace mirra::runner::tensorboard {

namespace {

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

Summary::Value& one_value(Event& event, const std::string& tag) {
  Summary::Value& value = *event.mutable_summary()->add_value();
  value.set_tag(tag);
  return value;
}

}  // namespace

graph::Expected<std::unique_ptr<EventFile>> EventFile::open(const std::string& directory,
                                                              std::chrono::milliseconds flush_interval) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) return graph::invalid_argument("cannot create the log directory '" + directory + "': " + ec.message());
  // Two files opened in one second by one process differ by their counter.
  static std::atomic<int> opened{0};
  const std::string path = (std::filesystem::path(directory) /
                            ("events.out.tfevents." + std::to_string(static_cast<int64_t>(seconds_since_epoch())) + "." +
                             host_name() + "." + std::to_string(::getpid()) + "." + std::to_string(opened++) + ".v2"))
                               .string();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return graph::invalid_argument("cannot write the event file '" + path + "': " + std::strerror(errno));
  auto writer = std::unique_ptr<EventFile>(new EventFile(path, file, flush_interval));
  writer->queue(0, [](Event& event) { event.set_file_version("brain.Event:2"); });
  return writer;
}

EventFile::EventFile(std::string path, std::FILE* file, std::chrono::milliseconds flush_interval)
    : path_(std::move(path)), file_(file), flush_interval_(flush_interval), writer_([this] { write_loop(); }) {}

EventFile::~EventFile() { (void)close(); }

void EventFile::scalar(const std::string& tag, int64_t step, double value) {
  queue(step, [tag, value](Event& event) { one_value(event, tag).set_simple_value(static_cast<float>(value)); });
}

void EventFile::scalars(int64_t step, std::function<Scalars()> compute) {
  queue(step, [compute = std::move(compute)](Event& event) {
    for (const auto& [tag, value] : compute()) one_value(event, tag).set_simple_value(static_cast<float>(value));
  });
}

void EventFile::histogram(const std::string& tag, int64_t step, runtime::Tensor values) {
  queue(step, [tag, values = std::move(values)](Event& event) {
    Histogram histogram;
    histogram.add(values);
    *one_value(event, tag).mutable_histo() = histogram.proto();
  });
}

void EventFile::text(const std::string& tag, int64_t step, const std::string& markdown) {
  queue(step, [tag, markdown](Event& event) {
    Summary::Value& value = one_value(event, tag);
    value.mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
    TensorProto& tensor = *value.mutable_tensor();
    tensor.set_dtype(DT_STRING);
    tensor.mutable_tensor_shape();  // a scalar
    tensor.add_string_val(markdown);
  });
}

void EventFile::graph(std::string graph_def) {
  queue(0, [graph_def = std::move(graph_def)](Event& event) { event.set_graph_def(graph_def); });
}

void EventFile::queue(int64_t step, Content content) {
  const double now = seconds_since_epoch();
  bool batch_ready;
  {
    const std::lock_guard lock(mutex_);
    if (closing_) return;
    pending_.push_back({now, step, std::move(content)});
    batch_ready = pending_.size() >= kBatch;
  }
  if (batch_ready) wake_.notify_one();  // else the writer comes by within the interval
}

graph::Status EventFile::close() {
  {
    const std::lock_guard lock(mutex_);
    if (closing_) return error_;
    closing_ = true;
  }
  wake_.notify_one();
  writer_.join();
  if (std::fclose(file_) != 0 && error_.ok()) {
    error_ = graph::invalid_argument("writing the event file '" + path_ + "' failed: " + std::strerror(errno));
  }
  return error_;
}

void EventFile::write_loop() {
  auto last_flush = std::chrono::steady_clock::now();
  bool unflushed = false;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait_for(lock, flush_interval_, [&] { return closing_ || pending_.size() >= kBatch; });
    while (!pending_.empty()) {
      Pending next = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      Event event;
      event.set_wall_time(next.wall_time);
      event.set_step(next.step);
      next.content(event);
      write_record(event.SerializeAsString());
      unflushed = true;
      lock.lock();
    }
    const auto now = std::chrono::steady_clock::now();
    if (unflushed && (closing_ || now - last_flush >= flush_interval_)) {
      lock.unlock();
      const bool ok = std::fflush(file_) == 0;
      lock.lock();
      if (!ok && error_.ok()) {
        error_ = graph::invalid_argument("writing the event file '" + path_ + "' failed: " + std::strerror(errno));
      }
      last_flush = now;
      unflushed = false;
    }
    if (closing_ && pending_.empty()) return;
  }
}

void EventFile::write_record(const std::string& record) {
  if (!error_.ok()) return;
  const std::string framed = runtime::data::tfrecord_frame(record);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size()) {
    const std::lock_guard lock(mutex_);
    error_ = graph::invalid_argument("writing the event file '" + path_ + "' failed: " + std::strerror(errno));
  }
}

}  // namespace mirra::runner::tensorboard
