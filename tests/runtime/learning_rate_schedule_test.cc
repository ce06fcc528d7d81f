// Learning-rate schedules against their formulas written out by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/training/learning_rate_schedule.h"

namespace mirra::runtime::training {
namespace {

TEST_CASE("LearningRateSchedule.values") {
  const LearningRateSchedule constant;
  CHECK(constant.is_constant());
  CHECK(constant.at(0.1, 12345) == 0.1);

  const LearningRateSchedule step{.kind = "step", .decay_steps = 10, .decay_rate = 0.5};
  CHECK(step.at(0.4, 0) == doctest::Approx(0.4));
  CHECK(step.at(0.4, 9) == doctest::Approx(0.4));
  CHECK(step.at(0.4, 10) == doctest::Approx(0.2));
  CHECK(step.at(0.4, 35) == doctest::Approx(0.05));

  const LearningRateSchedule cosine{.kind = "cosine", .decay_steps = 100, .alpha = 0.1};
  CHECK(cosine.at(1.0, 0) == doctest::Approx(1.0));
  CHECK(cosine.at(1.0, 50) == doctest::Approx(0.1 + 0.9 * 0.5));
  CHECK(cosine.at(1.0, 25) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4))));
  CHECK(cosine.at(1.0, 100) == doctest::Approx(0.1));
  CHECK(cosine.at(1.0, 1000) == doctest::Approx(0.1));

  // Warmup ramps linearly to the base, then the decay starts from its own step 0.
  const LearningRateSchedule warm{.kind = "step", .warmup_steps = 4, .decay_steps = 10, .decay_rate = 0.5};
  CHECK(!warm.is_constant());
  CHECK(warm.at(0.8, 0) == doctest::Approx(0.2));
  CHECK(warm.at(0.8, 1) == doctest::Approx(0.4));
  CHECK(warm.at(0.8, 3) == doctest::Approx(0.8));
  CHECK(warm.at(0.8, 4) == doctest::Approx(0.8));
  CHECK(warm.at(0.8, 14) == doctest::Approx(0.4));
  const LearningRateSchedule warm_constant{.warmup_steps = 2};
  CHECK(warm_constant.at(1.0, 0) == doctest::Approx(0.5));
  CHECK(warm_constant.at(1.0, 7) == doctest::Approx(1.0));
}

TEST_CASE("LearningRateSchedule.bad_settings_are_errors") {
  CHECK(LearningRateSchedule{.kind = "exponential"}.check().message() ==
        "learning-rate schedule 'exponential' is not known (constant, step, cosine)");
  CHECK(LearningRateSchedule{.kind = "cosine"}.check().message() == "the cosine schedule needs decay_steps > 0");
  CHECK(LearningRateSchedule{.warmup_steps = -1}.check().message() == "warmup_steps must not be negative");
  CHECK(LearningRateSchedule{.kind = "step", .decay_steps = 5, .decay_rate = 0}.check().message() ==
        "decay_rate must be positive");
  CHECK(LearningRateSchedule{.kind = "cosine", .decay_steps = 5, .alpha = 2}.check().message() == "alpha must be in [0, 1]");
  CHECK(LearningRateSchedule{.kind = "step", .decay_steps = 5}.check().ok());
}

}  // namespace
}  // namespace mirra::runtime::training
