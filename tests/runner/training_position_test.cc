// Training positions: after a step and after a number of steps (across epochs, from a resumed
// position), and where a checkpoint resumes under another global batch (the same example of the
// epoch, counted in the new batches) or shuffle seed (the checkpoint's kept).
#include <doctest/doctest.h>

#include "tools/mirra/training_position.h"

namespace mirra::runner {
namespace {

using serialization::TrainingPosition;

TEST_CASE("TrainingPosition.after_a_step_is_the_next_batch_or_the_next_epoch") {
  const TrainingPosition start{.data_seed = 7, .batch_size = 64};
  const TrainingPosition mid = position_after({.step = 4, .epoch = 1, .batch = 2, .batches_in_epoch = 10}, start);
  CHECK(mid == TrainingPosition{.step = 5, .epoch = 1, .batch_in_epoch = 3, .data_seed = 7, .batch_size = 64});
  const TrainingPosition end = position_after({.step = 9, .epoch = 1, .batch = 9, .batches_in_epoch = 10}, start);
  CHECK(end == TrainingPosition{.step = 10, .epoch = 2, .batch_in_epoch = 0, .data_seed = 7, .batch_size = 64});
}

TEST_CASE("TrainingPosition.after_steps_counts_on_from_where_training_started") {
  const TrainingPosition start{.step = 12, .epoch = 2, .batch_in_epoch = 3, .data_seed = 1, .batch_size = 32};
  CHECK(position_after_steps(start, 0, 5) == start);
  CHECK(position_after_steps(start, 2, 5) == TrainingPosition{.step = 14, .epoch = 3, .batch_in_epoch = 0, .data_seed = 1, .batch_size = 32});
  CHECK(position_after_steps(start, 8, 5) == TrainingPosition{.step = 20, .epoch = 4, .batch_in_epoch = 1, .data_seed = 1, .batch_size = 32});
  // Step by step, as a trainer's steps move it.
  TrainingPosition stepped = start;
  for (int64_t k = 0; k < 8; ++k) {
    const TrainingPosition before = stepped;
    stepped = position_after({.step = before.step, .epoch = before.epoch, .batch = before.batch_in_epoch, .batches_in_epoch = 5},
                             before);
    CHECK(stepped.batch_in_epoch == (before.batch_in_epoch + 1) % 5);
    CHECK(stepped.epoch == before.epoch + (before.batch_in_epoch == 4 ? 1 : 0));
  }
  CHECK(stepped == position_after_steps(start, 8, 5));
}

TEST_CASE("TrainingPosition.a_checkpoint_resumes_at_the_same_example_in_this_runs_batches") {
  RunConfig config;
  config.training.seed = 99;
  config.training.batch_size = 50;
  const serialization::Checkpoint checkpoint{
      .position = {.step = 30, .epoch = 1, .batch_in_epoch = 7, .data_seed = 5, .batch_size = 128}};
  const TrainingPosition resumed = resumed_position(checkpoint, config);
  CHECK(resumed.step == 30);
  CHECK(resumed.epoch == 1);
  CHECK(resumed.batch_in_epoch == 7 * 128 / 50);  // example 896: batch 17 of 50 (its partial batch seen again)
  CHECK(resumed.batch_size == 50);
  CHECK(resumed.data_seed == 5);  // the checkpoint's shuffle
  config.training.batch_size = 128;
  CHECK(resumed_position(checkpoint, config) == checkpoint.position);
}

}  // namespace
}  // namespace mirra::runner
