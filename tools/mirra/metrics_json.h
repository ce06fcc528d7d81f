// metrics_json: a signature's metrics (runtime::training::MetricValues) as a JSON object by name, as
// the runner's JSON summaries and --metrics lines print them; step_line: one --metrics line.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/training/trainer.h"

namespace mirra::runner {

inline nlohmann::json metrics_json(const runtime::training::MetricValues& metrics) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : metrics) object[name] = value;
  return object;
}

// A step's --metrics line: its step (counted from 1), epoch (from 1), batch, examples, loss, the rate
// it ran with, examples/s, the wait for its data and the seconds since training began.
inline nlohmann::json step_line(const runtime::training::StepMetrics& step, double learning_rate, double seconds) {
  nlohmann::json line = {{"step", step.step + 1},
                         {"epoch", step.epoch + 1},
                         {"batch", step.batch},
                         {"examples", step.examples},
                         {"loss", step.loss},
                         {"learning_rate", learning_rate},
                         {"examples_per_s", step.examples_per_second},
                         {"data_wait_ms", static_cast<double>(step.step_start_ns - step.data_start_ns) / 1e6},
                         {"seconds", seconds}};
  if (!step.metrics.empty()) line["metrics"] = metrics_json(step.metrics);
  return line;
}

}  // namespace mirra::runner
