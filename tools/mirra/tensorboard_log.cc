// TensorBoardLog: the tags of each step, epoch and histogram, and the files they go to.
#include "tools/mirra/tensorboard_log.h"

#include <algorithm>
#include <filesystem>

#include "tools/mirra/step_times.h"
#include "tools/mirra/tensorboard/graph_def.h"

namespace mirra::runner {

graph::Expected<std::unique_ptr<TensorBoardLog>> TensorBoardLog::open(const std::string& directory, const graph::Graph& graph) {
  MIRRA_ASSIGN_OR_RETURN(auto train, tensorboard::EventFile::open((std::filesystem::path(directory) / "train").string()));
  return std::unique_ptr<TensorBoardLog>(new TensorBoardLog(directory, graph, std::move(train)));
}

void TensorBoardLog::write_graph() { train_->graph(tensorboard::graph_def(graph_)); }

void TensorBoardLog::write_config(const std::string& config_json) {
  // Markdown: a code block keeps the JSON's indentation.
  train_->text("config", 0, "```\n" + config_json + "\n```");
}

void TensorBoardLog::step(const runtime::training::StepMetrics& step, std::vector<runtime::NodeTiming> timeline,
                          const StepExtras& extras) {
  // One event per step, its figures worked out on the writer's thread.
  train_->scalars(step.step + 1, [&graph = graph_, step_ns = static_cast<double>(step.step_end_ns - step.step_start_ns),
                                  data_wait_ns = static_cast<double>(step.step_start_ns - step.data_start_ns), loss = step.loss,
                                  metrics = step.metrics, examples_per_second = step.examples_per_second, extras,
                                  timeline = std::move(timeline)] {
    tensorboard::EventFile::Scalars values = {{"loss", loss}};
    for (const auto& metric : metrics) values.push_back(metric);
    values.insert(values.end(), {{"learning_rate", extras.learning_rate},
                                 {"examples_per_second", examples_per_second},
                                 {"step_time/step_ms", step_ns / 1e6},
                                 {"step_time/waiting_for_data_ms", data_wait_ns / 1e6}});
    if (!timeline.empty()) {
      // Compute: the devices' mean; exposed communication: the most any device waited on it.
      double compute_ns = 0, exposed_ns = 0;
      const auto devices = device_step_times(graph, timeline, step_ns);
      for (const auto& [device, time] : devices) {
        compute_ns += time.compute_ns;
        exposed_ns = std::max(exposed_ns, time.exposed_ns);
      }
      values.emplace_back("step_time/compute_ms", devices.empty() ? 0.0 : compute_ns / static_cast<double>(devices.size()) / 1e6);
      values.emplace_back("step_time/exposed_communication_ms", exposed_ns / 1e6);
    }
    if (extras.loss_scale) values.emplace_back("loss_scale", *extras.loss_scale);
    if (extras.skipped_steps) values.emplace_back("skipped_steps", static_cast<double>(*extras.skipped_steps));
    return values;
  });
}

void TensorBoardLog::histograms(int64_t step, std::vector<std::pair<std::string, runtime::Tensor>> values) {
  for (auto& [tag, tensor] : values) train_->histogram(tag, step, std::move(tensor));
}

void TensorBoardLog::epoch(const runtime::training::EpochMetrics& epoch) {
  const auto write = [&](tensorboard::EventFile& file, double loss, const std::optional<double>& accuracy,
                         const runtime::training::MetricValues& metrics) {
    file.scalar("epoch_loss", epoch.epoch, loss);
    if (accuracy) file.scalar("epoch_accuracy", epoch.epoch, *accuracy);
    for (const auto& [name, value] : metrics) file.scalar("epoch_" + name, epoch.epoch, value);
  };
  write(*train_, epoch.mean_loss, epoch.accuracy, epoch.metrics);
  train_->scalar("epoch_examples_per_second", epoch.epoch, epoch.examples_per_second);
  if (!epoch.evaluation) return;
  if (!validation_ && error_.ok()) {
    auto opened = tensorboard::EventFile::open((std::filesystem::path(directory_) / "validation").string());
    if (!opened.ok()) {
      error_ = opened.status();
      return;
    }
    validation_ = std::move(*opened);
  }
  if (validation_) write(*validation_, epoch.evaluation->mean_loss, epoch.evaluation->accuracy, epoch.evaluation->metrics);
}

graph::Status TensorBoardLog::close() {
  graph::Status status = train_->close();
  if (validation_) {
    const graph::Status closed = validation_->close();
    if (status.ok()) status = closed;
  }
  return status.ok() ? error_ : status;
}

}  // namespace mirra::runner
