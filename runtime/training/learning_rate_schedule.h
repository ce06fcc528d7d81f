// Learning-rate schedules, computed on the host per step and written into the optimizer's learning
// rate variable before the step runs: constant, step decay (times decay_rate every decay_steps),
// cosine decay (from the base to alpha * base over decay_steps), each optionally after a linear
// warmup (Goyal et al., 2017) that ramps from base / warmup_steps up to the base. Decay counts steps
// from the end of the warmup.
#pragma once

#include <cstdint>
#include <string>

#include "graph/status.h"

namespace mirra::runtime::training {

struct LearningRateSchedule {
  std::string kind = "constant";  // constant, step, cosine
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;  // step: the period; cosine: the length of the decay
  double decay_rate = 0.1;  // step
  double alpha = 0.0;       // cosine: the final rate as a fraction of the base

  graph::Status check() const;
  // The rate of step `step` (0-based) for a base rate `base`.
  double at(double base, int64_t step) const;
  bool is_constant() const { return kind == "constant" && warmup_steps == 0; }
};

}  // namespace mirra::runtime::training
