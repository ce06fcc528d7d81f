// RunConfig: everything `mirra train` needs besides the model, resolved as defaults < config file <
// flags. The file is the strategy config (strategies/config.h) plus "training", "data" and
// "checkpoint" objects; every key is documented in docs/config.md, and an unknown key, a wrong type or a bad value
// is an error naming the key and the file.
//
//   {"strategy": "mirrored", "training": {"epochs": 5, "batch_size": 256},
//    "data": {"train": {"files": ["train.npz"]}, "eval": {"files": ["test.npz"]}},
//    "checkpoint": {"dir": "ckpts", "keep": 3, "every_steps": 100}}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/status.h"
#include "ops/mixed_precision.h"
#include "ops/recomputation.h"
#include "runtime/data/image_augmentation.h"
#include "runtime/training/learning_rate_schedule.h"
#include "strategies/config.h"
#include "tools/mirra/data_spec.h"

namespace mirra::runner {

inline constexpr int64_t kMaxSeed = int64_t{1} << 62;  // shuffle seeds, from the config and --seed

struct TrainingConfig {
  std::string data;                     // the training data's shorthand (data_spec.h); data.train wins
  int64_t epochs = 3;
  int64_t steps = 0;                    // > 0: train this many steps in all instead of whole epochs
  int64_t batch_size = 128;             // global batch
  int64_t accumulation_steps = 1;       // batches per update (gradient accumulation): each step trains on k batches
  std::optional<double> learning_rate;  // unset: the model file's
  // Decoupled weight decay (SGDW, AdamW) and the name parts it skips; unset: the model file's.
  std::optional<double> weight_decay;
  std::optional<std::vector<std::string>> exclude_from_weight_decay;
  // Momentum and Adam update an embedding table's rows a step looks up alone, with their slots
  // (ops::Optimizer::lazy; TensorFlow's sparse momentum, LazyAdam); unset: the model file's.
  std::optional<bool> lazy_updates;
  runtime::training::LearningRateSchedule schedule;  // over the learning rate, by global step
  runtime::data::ImageAugmentation augmentation;     // of the training images (never the evaluation's)
  uint64_t seed = 1;                    // shuffle seed
  bool deterministic = false;           // one node at a time: bitwise-reproducible runs and resumes
  int threads = 0;                      // oneTBB threads; 0: all cores
  int64_t memory_limit = 0;             // bytes the run may plan to use; 0: nine tenths of physical memory
  bool check_numerics = false;          // also stop at the first non-finite gradient, before it is applied
  bool soft_placement = false;          // a node its device has no kernel for runs on cpu:0 instead of failing
  bool allow_tf32 = false;              // GPUs may run f32 products and convolutions in TF32
  bool cuda_graph = false;              // record the training step once and replay it (a CUDA graph on GPUs)
  // bf16 or fp16: products and convolutions on 16-bit operands; fp16 with dynamic loss scaling
  ops::MixedPrecision mixed_precision = ops::MixedPrecision::off;
  // Activations the backward pass computes again instead of keeping (ops/recomputation.h).
  ops::Recompute recompute = ops::Recompute::none;
  // TensorBoard event files in this directory (empty: none), from worker 0, or from each worker in a
  // folder of its own; histograms of the variables and gradients every this many steps (0: none).
  std::string logdir;
  bool logdir_per_worker = false;
  int64_t histogram_every = 0;
};

struct CheckpointConfig {
  std::string dir;          // empty: no checkpoints
  int keep = 3;             // newest checkpoints kept
  int64_t every_steps = 0;  // > 0: also every this many steps; always at the end of each epoch and of training
};

struct RunConfig {
  strategies::StrategyConfig strategy;
  TrainingConfig training;
  DataConfig data;
  CheckpointConfig checkpoint;
  bool devices_given = false;  // the devices were named, not defaulted from the strategy
  // parameter_server's cluster, the config's "cluster" object as JSON text ("" for none; the runner
  // reads it with MIRRA_CLUSTER: tools/mirra/cluster_spec.h).
  std::string cluster;
};

// The defaults (data from the Debian Fashion-MNIST package, Mirrored over the local devices).
RunConfig default_run_config();
// The training data: data.train, or training.data's shorthand.
graph::Expected<DataSpec> training_data_spec(const RunConfig& config);
// `source` names the text in errors ("train.json").
graph::Expected<RunConfig> parse_run_config(std::string_view json_text, std::string_view source);
graph::Expected<RunConfig> load_run_config(const std::string& path);
// Every field, as a config file would hold it (numbers at full precision).
std::string run_config_json(const RunConfig& config);
// "16G", "512M", "64K" (powers of 1024) or a plain number of bytes, at most 2^62; errors name `what`.
graph::Expected<int64_t> parse_byte_size(std::string_view text, std::string_view what);
// The memory limit in bytes: `configured` when positive, else the default (runtime::default_memory_limit).
int64_t memory_limit_bytes(int64_t configured);
// Checks that hold whichever layer set the values: positive counts, a known strategy for the devices.
graph::Status check_run_config(const RunConfig& config);

}  // namespace mirra::runner
