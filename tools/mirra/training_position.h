// Where training stands, as checkpoints record it: the position after a step (from the trainer's
// step, or counted on a parameter server that runs the workers' steps without their data); the
// checkpoint directory made ready, the newest good checkpoint to resume from, and the position it resumes at under this run's config (its
// shuffle seed kept, its place in the epoch converted to this run's global batch).
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/training/trainer.h"
#include "serialization/checkpoint.h"
#include "tools/mirra/run_config.h"

namespace mirra::runner {

// The position after `step`: the next batch of its epoch, or the start of the next epoch.
serialization::TrainingPosition position_after(const runtime::training::StepMetrics& step,
                                               const serialization::TrainingPosition& start);

// The position `steps` steps after `start`, in epochs of `batches_per_epoch` global batches (> 0).
serialization::TrainingPosition position_after_steps(const serialization::TrainingPosition& start, int64_t steps,
                                                     int64_t batches_per_epoch);

// Creates the checkpoint directory `dir` where it is missing, and checks that files can be written
// in it: errors name it.
graph::Status prepare_checkpoint_directory(const std::string& dir);

// The newest checkpoint of `store` that loads (a warning on stderr for each newer one that does not,
// and a note when there is none yet); nullopt for none.
graph::Expected<std::optional<serialization::Checkpoint>> latest_checkpoint(const serialization::CheckpointStore& store);

// Says on stdout that training resumes from `start`, and what saved `checkpoint`.
void print_resumed(const serialization::Checkpoint& checkpoint, const serialization::TrainingPosition& start);

// `checkpoint`'s position for a run with `config`: where the checkpoint was saved with a shuffle
// seed other than the config's, or counts batches of another size, a warning on stderr says what
// resuming keeps (the checkpoint's seed; the same example of the epoch, counted in the new batches:
// a partial batch's examples are seen again).
serialization::TrainingPosition resumed_position(const serialization::Checkpoint& checkpoint, const RunConfig& config);

}  // namespace mirra::runner
