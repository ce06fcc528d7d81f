// Training positions after steps and at a resumed checkpoint; the checkpoint to resume from.
#include "tools/mirra/training_position.h"

#include <cstdio>
#include <filesystem>

#include "serialization/file_io.h"

namespace mirra::runner {

using serialization::TrainingPosition;

TrainingPosition position_after(const runtime::training::StepMetrics& step, const TrainingPosition& start) {
  const bool epoch_done = step.batch + 1 >= step.batches_in_epoch;
  return {.step = step.step + 1,
          .epoch = epoch_done ? step.epoch + 1 : step.epoch,
          .batch_in_epoch = epoch_done ? 0 : step.batch + 1,
          .data_seed = start.data_seed,
          .batch_size = start.batch_size};
}

TrainingPosition position_after_steps(const TrainingPosition& start, int64_t steps, int64_t batches_per_epoch) {
  const int64_t batches = start.epoch * batches_per_epoch + start.batch_in_epoch + steps;
  return {.step = start.step + steps,
          .epoch = batches / batches_per_epoch,
          .batch_in_epoch = batches % batches_per_epoch,
          .data_seed = start.data_seed,
          .batch_size = start.batch_size};
}

graph::Status prepare_checkpoint_directory(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::create_directories(dir, ec) && ec) {
    return graph::invalid_argument("cannot create checkpoint directory '" + dir + "': " + ec.message());
  }
  return serialization::check_writable_directory(dir, "checkpoint directory");
}

graph::Expected<std::optional<serialization::Checkpoint>> latest_checkpoint(const serialization::CheckpointStore& store) {
  std::vector<std::string> warnings;
  auto latest = store.load_latest(warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "mirra: warning: %s\n", w.c_str());
  if (latest.ok() && !*latest) {
    std::fprintf(stderr, "mirra: no checkpoint in '%s' yet; starting from the model file\n", store.directory().c_str());
  }
  return latest;
}

void print_resumed(const serialization::Checkpoint& checkpoint, const TrainingPosition& start) {
  std::printf("resumed from step %lld (epoch %lld, batch %lld), saved by %s with %d replica%s\n", static_cast<long long>(start.step),
              static_cast<long long>(start.epoch + 1), static_cast<long long>(start.batch_in_epoch), checkpoint.strategy.c_str(),
              checkpoint.replicas, checkpoint.replicas == 1 ? "" : "s");
}

TrainingPosition resumed_position(const serialization::Checkpoint& checkpoint, const RunConfig& config) {
  TrainingPosition start = checkpoint.position;
  if (start.data_seed != config.training.seed) {
    std::fprintf(stderr, "mirra: warning: resuming with the checkpoint's shuffle seed %llu, not %llu\n",
                 static_cast<unsigned long long>(start.data_seed), static_cast<unsigned long long>(config.training.seed));
  }
  const int64_t batch = config.training.batch_size;
  if (start.batch_size != batch) {
    const int64_t examples_done = start.batch_in_epoch * start.batch_size;
    std::fprintf(stderr, "mirra: warning: the checkpoint counts batches of %lld; continuing with %lld from example %lld of the epoch\n",
                 static_cast<long long>(start.batch_size), static_cast<long long>(batch), static_cast<long long>(examples_done));
    start.batch_in_epoch = examples_done / batch;
    start.batch_size = batch;
  }
  return start;
}

}  // namespace mirra::runner
