// The time-to-accuracy benchmark: trains a benchmark model with the benchmark settings on one device
// until its test accuracy reaches a target (the Fashion-MNIST benchmark table lists 0.916 for the
// TF-tutorial CNN), and reports the epochs, the training time and every epoch's figures as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "graph/status.h"

namespace mirra::bench {

struct TimeToAccuracyOptions {
  std::string model = "cnn";
  double target = 0.916;
  int64_t max_epochs = 30;
  int threads = 0;  // 0: all cores
  uint64_t seed = 1;
  std::string data_dir;  // empty: Debian's dataset-fashion-mnist
};

graph::Expected<nlohmann::json> run_time_to_accuracy(const TimeToAccuracyOptions& options);

}  // namespace mirra::bench
