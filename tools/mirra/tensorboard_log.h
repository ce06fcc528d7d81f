// TensorBoardLog (`mirra train --logdir DIR`): a training run as TensorBoard shows it, in Keras's
// layout. DIR/train holds, every step, the loss, each metric of the model, the learning rate,
// examples/s and the step's time (the whole step, the wait for its batch, and from the executor's
// timeline the time computing and the exposed communication; fp16 adds the loss scale and the
// skipped steps); once, the rewritten training graph (the graph dashboard, by name scope and device)
// and the resolved config (the text dashboard); every epoch, epoch_loss, epoch_accuracy and
// epoch_<metric>; every histogram_every steps, histograms of the variables and their gradients
// (<variable>/gradient). DIR/validation holds the evaluations' epoch_* figures, so TensorBoard draws
// them over the training's. Steps count updates from 1, epochs from 0 (Keras's). Every write is
// queued to the event files' own threads (tensorboard/event_file.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "runtime/step_timeline.h"
#include "runtime/tensor.h"
#include "runtime/training/trainer.h"
#include "tools/mirra/tensorboard/event_file.h"

namespace mirra::runner {

class TensorBoardLog {
 public:
  // What the run knows of a step besides the trainer's metrics.
  struct StepExtras {
    double learning_rate = 0;
    std::optional<double> loss_scale;    // fp16's, after the step
    std::optional<int64_t> skipped_steps;  // fp16's steps skipped for overflow, so far
  };

  // `graph`: the session's graph, which the steps' timelines index (it must outlive the log).
  static graph::Expected<std::unique_ptr<TensorBoardLog>> open(const std::string& directory, const graph::Graph& graph);

  void write_graph();
  void write_config(const std::string& config_json);
  // `timeline`: the executor's timeline of the step (empty: no time split), cut by device on the
  // writer's thread.
  void step(const runtime::training::StepMetrics& step, std::vector<runtime::NodeTiming> timeline, const StepExtras& extras);
  void histograms(int64_t step, std::vector<std::pair<std::string, runtime::Tensor>> values);
  void epoch(const runtime::training::EpochMetrics& epoch);
  // Flushes and closes the files: the first write error, if any.
  graph::Status close();

 private:
  TensorBoardLog(std::string directory, const graph::Graph& graph, std::unique_ptr<tensorboard::EventFile> train)
      : directory_(std::move(directory)), graph_(graph), train_(std::move(train)) {}

  std::string directory_;
  const graph::Graph& graph_;
  std::unique_ptr<tensorboard::EventFile> train_;
  std::unique_ptr<tensorboard::EventFile> validation_;  // opened by the first evaluation
  graph::Status error_;  // opening the validation file failed
};

}  // namespace mirra::runner
