// replicate(): the graph rewrite behind MirroredStrategy and CentralStorageStrategy (see
// strategies/README.md). Every per-example node is cloned once per device as
// replica_<r>/<name>; each batch input is split on the host by SplitBatch; each replica's gradients
// are scaled by its share of the global batch (through the seed autodiff started from); then either
//   - mirror_state (Mirrored): variables, slots and updates are per replica too, and one all-reduce (SUM)
//     per bucket of gradients, a rank per replica, chained in one fixed order, hands every replica the
//     same sum; or
//   - not (CentralStorage): variables, slots and updates exist once on the host, and each gradient is
//     summed over the replicas there.
// Mirrored with shard_optimizer_state keeps only each replica's share of every optimizer slot
// (strategies/sharded_updates.h): gradients are reduce-scattered, each replica updates its share of
// each variable, and the shares are all-gathered. State the step writes from each replica's own values
// is combined as its variable's aggregation says (ops::VariableAggregation) before it is written, or,
// for a variable synchronised on read (moving statistics), by the signature's synchronize target
// before it is read. A bucket hook (bf16 compression) changes what the
// gradients are as they cross the all-reduce. The rewrite is a sequence of passes over a ReplicaGraph
// (strategies/replicate_passes.h), each pinned by a golden text.
// The loss and correct count are re-aggregated on the host: the loss's mean over the batch as the sum
// over replicas of their summed elements divided by the elements they average (for a mean over
// [B], [B, T], [B, k], ...), the rest of the loss (terms that do not depend on the batch:
// strategies/batch_mean_loss.h) built again around it, so a partial or empty share weighs exactly
// what it holds. Across workers (each feeding its shard of the global batch), the batch size, the
// loss sum, its element count and the correct count are all-reduced too.
//
// REQUIRES: the program's loss is a mean over the batch plus or minus terms that do not depend on it
//   (batch_mean_of); its batch inputs are the signature's (or, when it declares none, the placeholders
//   with an unknown dim 0), split on dim 0; the gradients are those
//   of its trainable variables.
// ENSURES: one step on a global batch B gives the variables one device would give on B.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/device_id.h"
#include "ops/collective_ops.h"
#include "strategies/all_reduce_plan.h"
#include "strategies/bucket_hooks.h"
#include "strategies/gradient_buckets.h"
#include "strategies/strategy.h"

namespace mirra::strategies {

// The scope of gradient accumulation's variables ("accumulate/examples", "replica_0/accumulate/fc1/w").
inline constexpr std::string_view kAccumulatorScope = "accumulate";

struct ReplicationPlan {
  std::vector<graph::DeviceId> devices;  // one replica per device
  graph::DeviceId host;                  // split, aggregation, step state (and central variables)
  bool mirror_state = true;
  // The collectives span worker processes too (MultiWorkerMirrored): the global batch is the sum of
  // the workers' batches, and the loss and correct count are summed across workers.
  bool across_workers = false;
  ops::WorkerPart worker;  // which worker's graph to build (across workers; only sharded state differs)
  BucketSizes buckets;  // of the gradients' collectives (all-reduces, or reduce-scatters and all-gathers)
  ops::CollectiveOptions collective;  // which implementation the collectives' ranks call, and their deadline
  // Where Mirrored's gradient buckets are summed (default: on the host, or on the device of a single
  // replica).
  AllReducePlan reduction;
  // ZeRO stage 1 (mirror_state only; across workers every replica of every worker holds its own
  // share): each update must read its gradient directly (no clipping, loss scaling or numerics
  // checks between them).
  bool shard_optimizer_state = false;
  // What each gradient of Mirrored's buckets becomes on its way through the all-reduce (bf16
  // compression: strategies/bucket_hooks.h); none: the gradients as they are.
  std::shared_ptr<const BucketHook> bucket_hook;
  // Batch normalisation in training normalises with the statistics of the whole batch, across every
  // replica and worker (strategies/batch_norm_sync.cc), instead of each replica's share.
  bool sync_batch_norm = false;
  // Each replica's batch inputs are placeholders of its own (replica_<r>/<name>, on its device), fed
  // with its share of the global batch by the task that runs it, instead of one batch split on the
  // host (the parameter-server strategy's workers, each reading its own data); the global batch is
  // the sum of the shares.
  bool replicas_feed_their_batches = false;
  // Each replica's own loss, correct count and metrics too, on its device (its share of the batch
  // alone), each an Identity named replica_report_name of the global batch's value and kept in the
  // result's `reported` (the bounded-staleness parameter-server workers, which report their own).
  bool report_each_replica = false;
};

// The name of replica r's own value of the global batch's reported value `global`
// (ReplicationPlan::report_each_replica): "<global>/of_replica_<r>".
std::string replica_report_name(std::string_view global, int replica);

// Called after each pass with its name and the graph it left (the passes' golden tests).
using PassObserver = std::function<void(std::string_view pass, const graph::Graph& graph)>;

graph::Expected<TrainingProgram> replicate(const TrainingProgram& program, const ReplicationPlan& plan,
                                           const PassObserver& after_each_pass = {});

}  // namespace mirra::strategies
