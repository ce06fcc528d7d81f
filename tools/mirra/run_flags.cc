// RunFlags: CLI11 options with ranges, applied over the config file.
#include "tools/mirra/run_flags.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "strategies/config_json.h"

namespace mirra::runner {

void add_run_flags(CLI::App& command, RunFlags& f) {
  command.add_option("--config", f.config_file, "JSON config file (docs/config.md); flags override it");
  command.add_option("--strategy", f.strategy,
                     "one_device, mirrored, central_storage, multi_worker_mirrored or parameter_server (default mirrored)");
  command.add_option("--update-mode", f.update_mode,
                     "parameter_server: async (each worker at its own pace; the default) or sync (one update per global batch)")
      ->check(CLI::IsMember({"async", "sync"}));
  command.add_option("--staleness", f.staleness,
                     "parameter_server, sync: how many steps old the variables a worker's step reads may be (default 0)")
      ->check(CLI::Range(0, 1000000));
  command.add_option("--devices", f.devices, "Comma-separated devices, e.g. cpu:0,cpu:1 (default: the local devices)");
  command.add_option("--logical-gpus-per-gpu", f.logical_gpus_per_gpu,
                     "Split each GPU into this many logical GPUs, each a replica of its own (default 1)")
      ->check(CLI::Range(1, strategies::kMaxLogicalGpusPerGpu));
  command.add_option("--data", f.data,
                     "Training data: a directory of Fashion-MNIST's IDX files, or .npy/.npz files (comma-separated) "
                     "whose arrays are named as the model's placeholders (default: Debian's Fashion-MNIST)");
  command.add_option("--data-threads", f.data_threads, "Threads that assemble each batch (default 1)")->check(CLI::Range(1, 1024));
  auto* epochs = command.add_option("--epochs", f.epochs, "Epochs to train in all (default 3)")->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  command.add_option("--steps", f.steps, "Steps to train in all, instead of epochs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->excludes(epochs);
  command.add_option("--batch-size", f.batch_size, "Global batch size (default 128)")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command.add_option("--accumulation-steps", f.accumulation_steps,
                     "Batches per update: gradients accumulated locally, all-reduced and applied once (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command.add_option("--lr", f.learning_rate, "Learning rate (default: the model file's)")->check(CLI::Range(1e-12, 1e6));
  command.add_option("--weight-decay", f.weight_decay,
                     "Decoupled weight decay (SGDW, AdamW): each step scales a variable by 1 - lr * decay first "
                     "(default: the model file's)")
      ->check(CLI::Range(0.0, 1e6));
  command.add_option("--exclude-from-weight-decay", f.exclude_from_weight_decay,
                     "Comma-separated parts of variable names that are not decayed, e.g. gamma,beta,bias");
  command.add_option("--crop-padding", f.crop_padding,
                     "Augment the training images: pad each side with this many zero pixels and crop back at a "
                     "random offset (default 0: none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  command.add_flag("--horizontal-flip", f.horizontal_flip, "Augment the training images: mirror half of them left to right");
  command.add_option("--schedule", f.schedule, "Learning-rate schedule: constant, step or cosine (default constant)")
      ->check(CLI::IsMember({"constant", "step", "cosine"}));
  command.add_option("--warmup-steps", f.warmup_steps, "Linear warmup steps before the schedule (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  command.add_option("--decay-steps", f.decay_steps, "step: the decay period; cosine: the decay's length")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  command.add_option("--seed", f.seed, "Shuffle seed (default 1)")->check(CLI::Range(int64_t{0}, kMaxSeed));
  command.add_flag("--deterministic", f.deterministic, "One node at a time: bitwise-reproducible runs and resumes");
  command.add_option("--threads", f.threads, "oneTBB threads (default 0: all cores)")->check(CLI::Range(0, 1024));
  command.add_option("--memory-limit", f.memory_limit,
                     "Most memory the run may plan to use, e.g. 16G (default: nine tenths of physical memory)");
  command.add_flag("--lazy-updates", f.lazy_updates,
                   "Momentum and Adam update an embedding table's rows a step looks up alone, with their slots "
                   "(TensorFlow's LazyAdam)");
  command.add_flag("--check-numerics", f.check_numerics,
                   "Stop at the first non-finite gradient, before it is applied (the loss is always checked)");
  command.add_flag("--sync-batch-norm", f.sync_batch_norm,
                   "Batch normalisation takes the statistics of the whole batch across replicas and workers, not "
                   "each replica's share's");
  command.add_flag("--soft-placement", f.soft_placement,
                   "Run a node its device has no kernel for on cpu:0 instead of failing");
  command.add_flag("--allow-tf32", f.allow_tf32, "Let GPUs run f32 matrix products and convolutions in TF32 (faster, less exact)");
  command.add_flag("--cuda-graph", f.cuda_graph,
                   "Record the training step once and replay it (a CUDA graph on GPUs); a step that cannot be "
                   "replayed runs as usual and says why");
  command.add_option("--mixed-precision", f.mixed_precision,
                     "bf16 or fp16: matrix products and convolutions on 16-bit operands, f32 everywhere else; fp16 "
                     "with dynamic loss scaling (default off)")
      ->check(CLI::IsMember({"off", "bf16", "fp16"}));
  command.add_option("--recompute", f.recompute,
                     "none, blocks or all: activations the backward pass computes again instead of keeping them, "
                     "besides the scopes the model marks (blocks: each name scope block<N>, its input kept; all: the "
                     "blocks and every scope beside them; default none)")
      ->check(CLI::IsMember({"none", "blocks", "all"}));
  command.add_flag("--shard-optimizer-state", f.shard_optimizer_state,
                   "mirrored and multi_worker_mirrored: each replica keeps only its share of the optimizer slots "
                   "(ZeRO stage 1)");
  command.add_option("--checkpoint-dir", f.checkpoint_dir, "Directory for checkpoints (default: none)");
  command.add_option("--keep-checkpoints", f.keep_checkpoints, "Newest checkpoints to keep (default 3)")->check(CLI::Range(1, 1000));
  command.add_option("--checkpoint-every", f.checkpoint_every, "Also checkpoint every N steps (default: each epoch)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  command.add_option("--logdir", f.logdir,
                     "Write TensorBoard event files here (train/ and validation/): scalars every step, the graph, "
                     "the config, the epochs' metrics (default: none)");
  command.add_flag("--logdir-per-worker", f.logdir_per_worker,
                   "Multi-worker runs: every worker writes its own event files (in worker_<rank>/), not only worker 0");
  command.add_option("--histogram-every", f.histogram_every,
                     "With --logdir: histograms of the variables and their gradients every N steps (default 0: none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
}

std::vector<std::string> split_comma_list(const std::string& list) {
  std::vector<std::string> items;
  for (size_t start = 0; !list.empty() && start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

graph::Expected<RunConfig> resolve_run_config(const RunFlags& f) {
  RunConfig config = default_run_config();
  if (!f.config_file.empty()) {
    MIRRA_ASSIGN_OR_RETURN(config, load_run_config(f.config_file));
  }
  if (f.strategy || f.devices || f.logical_gpus_per_gpu) {
    nlohmann::json strategy = {{"strategy", f.strategy.value_or(config.strategy.strategy)},
                               {"logical_gpus_per_gpu", f.logical_gpus_per_gpu.value_or(config.strategy.logical_gpus_per_gpu)}};
    if (f.devices) {
      strategy["devices"] = split_comma_list(*f.devices);
    } else if (config.devices_given && f.strategy.value_or(config.strategy.strategy) == config.strategy.strategy) {
      std::vector<std::string> names;
      for (const auto& d : config.strategy.devices) names.push_back(d.to_string());
      strategy["devices"] = names;
    }
    const strategies::StrategyConfig from_file = config.strategy;
    MIRRA_ASSIGN_OR_RETURN(config.strategy,
                           strategies::strategy_config_from_json(strategy, "--strategy/--devices/--logical-gpus-per-gpu"));
    config.strategy.all_reduce = from_file.all_reduce;
    config.strategy.shard_optimizer_state = from_file.shard_optimizer_state;
    if (config.strategy.strategy == from_file.strategy) {  // the config's keys of that strategy still hold
      config.strategy.min_shard_bytes = from_file.min_shard_bytes;
      config.strategy.asynchronous = from_file.asynchronous;
      config.strategy.staleness = from_file.staleness;
    }
    config.devices_given = config.devices_given || f.devices.has_value();
  }
  if (f.shard_optimizer_state) config.strategy.shard_optimizer_state = true;
  if (f.update_mode) {
    if (config.strategy.strategy != "parameter_server") {
      return graph::invalid_argument("--update-mode applies to parameter_server, not to " + config.strategy.strategy);
    }
    config.strategy.asynchronous = *f.update_mode == "async";
    if (config.strategy.asynchronous) config.strategy.staleness = 0;
  }
  if (f.staleness) {
    if (config.strategy.strategy != "parameter_server" || config.strategy.asynchronous) {
      return graph::invalid_argument("--staleness bounds how far a worker runs ahead under parameter_server's sync update mode "
                                     "(--update-mode sync)");
    }
    config.strategy.staleness = *f.staleness;
  }
  if (f.data) {
    config.training.data = *f.data;
    config.data.train.reset();  // the flag names the training data
  }
  if (f.data_threads) config.data.threads = *f.data_threads;
  if (f.epochs) {
    config.training.epochs = *f.epochs;
    config.training.steps = 0;
  }
  if (f.steps) config.training.steps = *f.steps;
  if (f.batch_size) config.training.batch_size = *f.batch_size;
  if (f.accumulation_steps) config.training.accumulation_steps = *f.accumulation_steps;
  if (f.learning_rate) config.training.learning_rate = *f.learning_rate;
  if (f.weight_decay) config.training.weight_decay = *f.weight_decay;
  if (f.exclude_from_weight_decay) {
    std::vector<std::string> names = split_comma_list(*f.exclude_from_weight_decay);
    if (std::find(names.begin(), names.end(), "") != names.end()) {
      return graph::invalid_argument("--exclude-from-weight-decay '" + *f.exclude_from_weight_decay +
                                     "' holds an empty name, which every variable contains");
    }
    config.training.exclude_from_weight_decay = std::move(names);
  }
  if (f.crop_padding) config.training.augmentation.crop_padding = *f.crop_padding;
  if (f.horizontal_flip) config.training.augmentation.horizontal_flip = true;
  if (f.schedule) config.training.schedule.kind = *f.schedule;
  if (f.warmup_steps) config.training.schedule.warmup_steps = *f.warmup_steps;
  if (f.decay_steps) config.training.schedule.decay_steps = *f.decay_steps;
  if (f.seed) config.training.seed = static_cast<uint64_t>(*f.seed);
  if (f.deterministic) config.training.deterministic = true;
  if (f.threads) config.training.threads = *f.threads;
  if (f.memory_limit) {
    MIRRA_ASSIGN_OR_RETURN(config.training.memory_limit, parse_byte_size(*f.memory_limit, "--memory-limit"));
  }
  if (f.check_numerics) config.training.check_numerics = true;
  if (f.lazy_updates) config.training.lazy_updates = true;
  if (f.sync_batch_norm) config.strategy.sync_batch_norm = true;
  if (f.soft_placement) config.training.soft_placement = true;
  if (f.allow_tf32) config.training.allow_tf32 = true;
  if (f.cuda_graph) config.training.cuda_graph = true;
  if (f.recompute) {
    MIRRA_ASSIGN_OR_RETURN(config.training.recompute, ops::parse_recompute(*f.recompute));
  }
  if (f.mixed_precision) {
    MIRRA_ASSIGN_OR_RETURN(config.training.mixed_precision, ops::parse_mixed_precision(*f.mixed_precision));
  }
  if (f.checkpoint_dir) config.checkpoint.dir = *f.checkpoint_dir;
  if (f.keep_checkpoints) config.checkpoint.keep = *f.keep_checkpoints;
  if (f.checkpoint_every) config.checkpoint.every_steps = *f.checkpoint_every;
  if (f.logdir) config.training.logdir = *f.logdir;
  if (f.logdir_per_worker) config.training.logdir_per_worker = true;
  if (f.histogram_every) config.training.histogram_every = *f.histogram_every;
  MIRRA_RETURN_IF_ERROR(check_run_config(config));
  return config;
}

}  // namespace mirra::runner
