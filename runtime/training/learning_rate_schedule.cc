// LearningRateSchedule: validation and the rate of each step.
#include "runtime/training/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mirra::runtime::training {

graph::Status LearningRateSchedule::check() const {
  if (kind != "constant" && kind != "step" && kind != "cosine") {
    return graph::invalid_argument("learning-rate schedule '" + kind + "' is not known (constant, step, cosine)");
  }
  if (warmup_steps < 0) return graph::invalid_argument("warmup_steps must not be negative");
  if (kind != "constant" && decay_steps <= 0) {
    return graph::invalid_argument("the " + kind + " schedule needs decay_steps > 0");
  }
  if (kind == "step" && !(decay_rate > 0)) return graph::invalid_argument("decay_rate must be positive");
  if (kind == "cosine" && !(alpha >= 0 && alpha <= 1)) return graph::invalid_argument("alpha must be in [0, 1]");
  return graph::Status();
}

double LearningRateSchedule::at(double base, int64_t step) const {
  if (step < warmup_steps) return base * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_step = step - warmup_steps;
  if (kind == "step") return base * std::pow(decay_rate, static_cast<double>(decay_step / decay_steps));
  if (kind == "cosine") {
    const double progress = static_cast<double>(std::min(decay_step, decay_steps)) / static_cast<double>(decay_steps);
    return base * (alpha + (1.0 - alpha) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  return base;
}

}  // namespace mirra::runtime::training
