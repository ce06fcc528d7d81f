// The flags that override a RunConfig (`mirra train` and `mirra config --print` share them), and the
// resolution defaults < config file < flags.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "tools/mirra/run_config.h"

namespace mirra::runner {

struct RunFlags {
  std::string config_file;
  std::optional<std::string> strategy, update_mode, devices, data, checkpoint_dir, logdir, schedule, memory_limit, mixed_precision, recompute;
  std::optional<int64_t> epochs, steps, batch_size, accumulation_steps, checkpoint_every, warmup_steps, decay_steps, histogram_every;
  std::optional<double> learning_rate, weight_decay;
  std::optional<std::string> exclude_from_weight_decay;  // comma-separated name parts
  std::optional<int64_t> seed, crop_padding;
  std::optional<int> threads, data_threads, keep_checkpoints, logical_gpus_per_gpu, staleness;
  bool deterministic = false;
  bool check_numerics = false;
  bool lazy_updates = false;
  bool sync_batch_norm = false;
  bool horizontal_flip = false;
  bool soft_placement = false;
  bool allow_tf32 = false;
  bool cuda_graph = false;
  bool shard_optimizer_state = false;
  bool logdir_per_worker = false;
};

void add_run_flags(CLI::App& command, RunFlags& flags);
// "cpu:0,cpu:1" -> {"cpu:0", "cpu:1"}; "" -> {}.
std::vector<std::string> split_comma_list(const std::string& list);
graph::Expected<RunConfig> resolve_run_config(const RunFlags& flags);

}  // namespace mirra::runner
