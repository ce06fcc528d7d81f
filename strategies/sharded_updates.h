// shard_updates(): sharded optimizer state (ZeRO stage 1) inside Mirrored's rewrite. Every replica
// keeps a full copy of each variable but only its share of each optimizer slot: a variable's gradients
// are reduce-scattered instead of all-reduced, each replica updates its share of the variable with its
// share of the slots, and the updated shares are joined into every replica's copy. Optimizer
// memory per replica becomes about 1/N; the variables end bitwise equal on every replica, as in
// Mirrored. See Note [Sharded optimizer state] in the .cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/device_id.h"
#include "ops/collective_ops.h"
#include "strategies/gradient_buckets.h"

namespace mirra::strategies {

// One variable as replicate() cloned it, per replica r: its copy of the variable, the update node
// that applies its gradient (ApplyGradientDescent, ApplyMomentum or ApplyAdam, reading the gradient
// directly or clipped by the global norm), and the gradient to sum over the replicas (already scaled by the replica's share of the
// batch).
struct ShardedVariable {
  std::string name;  // replica-free, for the new nodes' names
  std::vector<graph::ValueRef> copies;
  std::vector<graph::NodeId> updates;
  std::vector<graph::ValueRef> gradients;
};

struct ShardingPlan {
  std::vector<graph::DeviceId> devices;  // one replica per device
  graph::DeviceId host;                  // where the reduce-scatters meet, unless `peer`
  ops::CollectiveOptions collective;
  ops::WorkerPart worker;  // across workers: this graph's worker, whose replicas hold its parts of the shares
  BucketSizes buckets;     // of the reduce-scatters and all-gathers, several variables each
  // Each replica has a device of its own (AllReducePath::peer): the devices reduce-scatter among
  // themselves (NCCL between GPUs) instead of meeting on the host.
  bool peer = false;
  // The optimizer clips by the global norm: every replica scales its shares by clip / max(norm, clip),
  // the norm of the whole aggregated gradient (every share of every worker), before its updates.
  std::optional<double> clip_global_norm;
};

// Rewrites the updates of `variables` (in the order their gradients become ready, which is the order
// of their reduce-scatters, a bucket of variables each) and returns the nodes the train target must
// wait for: one write of the joined shares per replica and variable. Each slot becomes a flat
// Variable of the replica's share with a `shard_of` attr holding the variable's shape.
graph::Expected<std::vector<graph::NodeId>> shard_updates(graph::Builder& b, const std::vector<ShardedVariable>& variables,
                                                          const ShardingPlan& plan);

}  // namespace mirra::strategies
