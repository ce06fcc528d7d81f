// Strategy::distribute (a strategy's rewrite, then the check of its result), the strategies as thin
// adapters from their config to a rewrite (OneDevice; Mirrored, CentralStorage and MultiWorkerMirrored
// as one replicating strategy), and the factory.
#include "strategies/strategy.h"

#include "ops/inference_mode.h"
#include "ops/sparse_updates.h"

#include "graph/verify.h"
#include "runtime/device_kinds.h"
#include "strategies/bucket_hooks.h"
#include "strategies/one_device.h"
#include "strategies/parameter_server.h"
#include "strategies/pruning.h"
#include "strategies/replicate.h"

namespace mirra::strategies {

namespace {

class OneDeviceStrategy final : public Strategy {
 public:
  explicit OneDeviceStrategy(StrategyConfig config) : config_(std::move(config)) {}
  const StrategyConfig& config() const override { return config_; }

 private:
  graph::Expected<TrainingProgram> rewrite(const TrainingProgram& program, const ops::WorkerPart&) const override {
    // With gradient accumulation it is Mirrored over its one device: the rewrite that builds the
    // accumulators (an all-reduce of one replica is in place on the device).
    if (program.accumulate_gradients) return replicate(program, {.devices = config_.devices, .host = {graph::DeviceKind::cpu, 0}});
    TrainingProgram placed = program;
    placed.graph = place_on_device(program.graph, config_.devices.front());
    return placed;
  }

  StrategyConfig config_;
};

// Mirrored (mirror_state) and CentralStorage differ only in where state lives; MultiWorkerMirrored is
// Mirrored whose collectives also span the workers.
class ReplicatingStrategy final : public Strategy {
 public:
  ReplicatingStrategy(StrategyConfig config, bool mirror_state, bool across_workers)
      : config_(std::move(config)), mirror_state_(mirror_state), across_workers_(across_workers) {}
  const StrategyConfig& config() const override { return config_; }
  bool across_workers() const override { return across_workers_; }
  AllReducePlan all_reduce_plan() const override {
    return plan_all_reduce(config_.devices, {.logical_gpus_per_gpu = config_.logical_gpus_per_gpu,
                                             .implementation = config_.all_reduce.implementation,
                                             .across_workers = across_workers_,
                                             .central_variables = !mirror_state_,
                                             .sharded_state = config_.shard_optimizer_state});
  }

 private:
  graph::Expected<TrainingProgram> rewrite(const TrainingProgram& program, const ops::WorkerPart& part) const override {
    constexpr double kMiB = 1 << 20;
    if (part.workers > 1 && !across_workers_) {
      return graph::invalid_argument(config_.strategy + " runs in one process, not as worker " + std::to_string(part.worker) +
                                     " of " + std::to_string(part.workers));
    }
    std::string implementation = config_.all_reduce.implementation;
    if (across_workers_ && implementation == "auto") implementation = "mpi";
    return replicate(program, {.devices = config_.devices,
                               .host = {graph::DeviceKind::cpu, 0},
                               .mirror_state = mirror_state_,
                               .across_workers = across_workers_,
                               .worker = part,
                               .buckets = {.first_bucket_bytes = static_cast<int64_t>(config_.all_reduce.first_bucket_mb * kMiB),
                                           .bucket_bytes = static_cast<int64_t>(config_.all_reduce.bucket_mb * kMiB)},
                               .collective = {.implementation = implementation,
                                              .timeout_ms = static_cast<int64_t>(config_.all_reduce.timeout_s * 1000)},
                               .reduction = all_reduce_plan(),
                               .shard_optimizer_state = config_.shard_optimizer_state,
                               .bucket_hook = config_.all_reduce.compression == "bf16" ? bf16_compression() : nullptr,
                               .sync_batch_norm = config_.sync_batch_norm});
  }

  StrategyConfig config_;
  bool mirror_state_, across_workers_;
};

// The number `digits` spell (non-empty, up to 100000-odd), or -1.
int index_of(std::string_view digits) {
  if (digits.empty()) return -1;
  int n = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9' || n > 100000) return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

graph::Expected<TrainingProgram> Strategy::distribute(const TrainingProgram& program, const ops::WorkerPart& part) const {
  // Pruned before (nothing dead is cloned) and after (nothing the rewrite left unread stays).
  TrainingProgram pruned = program;
  prune(pruned);
  MIRRA_ASSIGN_OR_RETURN(TrainingProgram distributed, rewrite(pruned, part));
  // Every strategy's embedding tables updated by rows where its result lets them be.
  MIRRA_RETURN_IF_ERROR(ops::update_looked_up_rows(distributed.graph, *distributed.ops));
  prune(distributed);
  // Evaluation's values in inference mode (the moving statistics), beside the training step's.
  MIRRA_RETURN_IF_ERROR(ops::add_inference_values(distributed.graph, *distributed.ops, distributed.signature));
  const runtime::training::TrainingGraph& signature = distributed.signature;
  const runtime::training::TrainingGraph evaluated = signature.for_evaluation();
  std::vector<graph::NodeId> run;
  for (const graph::NodeId id : {signature.train, signature.loss.node, signature.correct.node, signature.accumulate,
                                 signature.synchronize, evaluated.loss.node, evaluated.correct.node}) {
    if (id < distributed.graph.size()) run.push_back(id);
  }
  if (const graph::Status valid = graph::verify_types(distributed.graph, *distributed.ops, run); !valid.ok()) {
    return graph::internal_error(describe() + ": the rewrite left an invalid node: " + valid.message());
  }
  return distributed;
}

std::string_view partition_free_name(std::string_view name, int* part) {
  constexpr std::string_view kInfix = "/part_";
  const size_t at = name.rfind(kInfix);
  *part = at == std::string_view::npos || at == 0 ? -1 : index_of(name.substr(at + kInfix.size()));
  return *part < 0 ? name : name.substr(0, at);
}

std::string_view replica_free_name(std::string_view name, int* replica) {
  constexpr std::string_view kPrefix = "replica_";
  const size_t slash = name.find('/');
  *replica = !name.starts_with(kPrefix) || slash == std::string_view::npos ? -1
                                                                           : index_of(name.substr(kPrefix.size(), slash - kPrefix.size()));
  return *replica < 0 ? name : name.substr(slash + 1);
}

std::string_view stored_variable_name(const graph::Node& variable) {
  int replica = -1, part = -1;
  const std::string_view name = replica_free_name(variable.name, &replica);
  return variable.attrs.contains("partition_of") ? partition_free_name(name, &part) : name;
}

bool is_accumulator(std::string_view name) {
  return name.starts_with(kAccumulatorScope) && name.substr(kAccumulatorScope.size()).starts_with('/');
}

std::string Strategy::describe() const {
  std::string text = config().strategy + " over ";
  for (size_t i = 0; i < config().devices.size(); ++i) text += (i ? ", " : "") + config().devices[i].to_string();
  if (config().shard_optimizer_state) text += ", optimizer state sharded";
  return text;
}

graph::Expected<std::unique_ptr<Strategy>> make_strategy(const StrategyConfig& config) {
  StrategyConfig resolved = config;
  if (resolved.logical_gpus_per_gpu < 1) return graph::invalid_argument("logical_gpus_per_gpu must be at least 1");
  if (resolved.devices.empty()) resolved.devices = default_devices(resolved.strategy, resolved.logical_gpus_per_gpu);
  for (const graph::DeviceId& device : resolved.devices) {
    const graph::Status available = runtime::check_available(device, resolved.logical_gpus_per_gpu);
    if (!available.ok()) return available.with_context("strategy " + resolved.strategy);
  }
  if (resolved.strategy == "one_device") {
    if (resolved.devices.size() != 1) return graph::invalid_argument("one_device needs exactly one device");
    return std::unique_ptr<Strategy>(new OneDeviceStrategy(std::move(resolved)));
  }
  if (resolved.strategy == "mirrored" || resolved.strategy == "central_storage" || resolved.strategy == "multi_worker_mirrored") {
    const bool mirror_state = resolved.strategy != "central_storage";
    const bool across_workers = resolved.strategy == "multi_worker_mirrored";
    return std::unique_ptr<Strategy>(new ReplicatingStrategy(std::move(resolved), mirror_state, across_workers));
  }
  if (resolved.strategy == "parameter_server") return make_parameter_server_strategy(std::move(resolved));
  return graph::invalid_argument("strategy '" + resolved.strategy +
                                 "' is not known (one_device, mirrored, central_storage, multi_worker_mirrored, "
                                 "parameter_server)");
}

}  // namespace mirra::strategies
