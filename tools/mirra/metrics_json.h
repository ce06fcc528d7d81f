// metrics_json: a signature's metrics (runtime::training::MetricValues) as a JSON object by name, as
// the runner's JSON summaries and --metrics lines print them.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/training/trainer.h"

namespace mirra::runner {

inline nlohmann::json metrics_json(const runtime::training::MetricValues& metrics) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : metrics) object[name] = value;
  return object;
}

}  // namespace mirra::runner
