// StrategyConfig: which strategy, over which devices, with which all-reduce settings, read from JSON
// (nlohmann-json). Every key is documented in docs/config.md. An unknown key, a wrong type or a bad
// value is an error naming the key and where the config came from.
//
//   {"strategy": "mirrored", "devices": ["cpu:0", "cpu:1"], "logical_gpus_per_gpu": 1,
//    "all_reduce": {"implementation": "auto", "bucket_mb": 25, "first_bucket_mb": 1, "timeout_s": 300,
//                   "compression": "none"},
//    "shard_optimizer_state": false}
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/device_id.h"
#include "graph/status.h"

namespace mirra::strategies {

struct AllReduceConfig {
  // auto, in_process or mpi (multi_worker_mirrored's, and its auto). auto reduces replicas that share
  // a device's memory there (strategies/all_reduce_plan.h); in_process meets every replica on the host.
  std::string implementation = "auto";
  double bucket_mb = 25;                // cap of a gradient bucket, MiB
  double first_bucket_mb = 1;           // cap of the first (last layers') bucket, MiB
  double timeout_s = 300;               // how long a collective waits for every replica; 0: forever
  std::string compression = "none";     // or bf16: f32 gradients all-reduced as bf16, summed in f32
};

// parameter_server: how many tasks of each role the cluster has (the runner takes them from its
// cluster spec, MIRRA_CLUSTER); every worker trains one replica on the config's one device.
struct ClusterShape {
  int servers = 1;
  int workers = 1;
};

struct StrategyConfig {
  // one_device, mirrored, central_storage, multi_worker_mirrored, parameter_server
  std::string strategy = "mirrored";
  std::vector<graph::DeviceId> devices;  // empty: the local devices (default_devices)
  // Logical GPUs per physical GPU (graph/device_id.h): gpu:0 .. gpu:kP-1 on P GPUs, so that one GPU
  // holds several replicas. cpu_async devices, the GPU's model, split the same way.
  int logical_gpus_per_gpu = 1;
  AllReduceConfig all_reduce;
  // Mirrored and MultiWorkerMirrored: each replica keeps its share of the optimizer slots (ZeRO stage
  // 1; across workers, its share among every worker's replicas).
  bool shard_optimizer_state = false;
  // Mirrored, CentralStorage and MultiWorkerMirrored: batch normalisation normalises with the
  // statistics of the whole batch across the replicas and workers (the run config's
  // training.sync_batch_norm), not each replica's share's.
  bool sync_batch_norm = false;
  ClusterShape cluster;  // parameter_server's
  // parameter_server: a trained variable of B bytes is cut along axis 0 into min(servers,
  // B / min_shard_bytes, its rows) parts, each on a server of its own when it can (TensorFlow's
  // MinSizePartitioner); 0 keeps every variable whole (TensorFlow's default: no partitioner).
  int64_t min_shard_bytes = 0;
  // parameter_server: "update_mode": "async" (the default, TensorFlow's: each worker pulls, computes
  // and pushes at its own pace, its gradients applied as they come) or "sync" (every worker's
  // gradients of a step summed and applied once: one device's training on the global batch).
  bool asynchronous = true;
  // parameter_server, sync: how many steps old the variables a worker's step reads are, and so how
  // far it may run ahead of the slowest worker ("staleness"; 0: none).
  int staleness = 0;
};

inline constexpr int kMaxLogicalGpusPerGpu = 64;

// The local devices a strategy uses when the config names none: the machine's GPUs when it has any,
// each as `logical_gpus_per_gpu` logical GPUs (the first for one_device and parameter_server), else
// two logical CPU devices (cpu:0 for one_device and parameter_server).
std::vector<graph::DeviceId> default_devices(std::string_view strategy, int logical_gpus_per_gpu = 1);

// Why `config` cannot shard its optimizer state ("applies to ..."), or "" when it can or does not ask to.
std::string shard_optimizer_state_problem(const StrategyConfig& config);
// Why `config` cannot compress its all-reduce to bf16, or "" when it can or does not ask to.
std::string compression_problem(const StrategyConfig& config);

// `source` names where the text came from ("config.json", "--strategy") in error messages.
graph::Expected<StrategyConfig> parse_strategy_config(std::string_view json_text, std::string_view source);
graph::Expected<StrategyConfig> load_strategy_config(const std::string& path);

}  // namespace mirra::strategies
