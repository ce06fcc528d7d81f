// Training progress for people: on a terminal, a live bar per epoch (step, loss, examples/s, ETA),
// redrawn at most ten times a second; otherwise one plain line per epoch, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdio>

#include "runtime/training/trainer.h"

namespace mirra::runner {

class ProgressReporter {
 public:
  // `out` is a terminal or not (isatty), or null for a silent reporter; `total_epochs` 0 when
  // training by steps.
  ProgressReporter(std::FILE* out, bool terminal, int64_t total_epochs);

  void on_step(const runtime::training::StepMetrics& step);
  void on_epoch(const runtime::training::EpochMetrics& epoch);

 private:
  std::FILE* out_;
  bool terminal_;
  int64_t total_epochs_;
  std::chrono::steady_clock::time_point epoch_start_, last_draw_;
  int64_t epoch_ = -1, epoch_steps_ = 0;
  double loss_ = 0;  // exponential moving average for the bar
};

}  // namespace mirra::runner
