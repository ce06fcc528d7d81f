// The passes replicate() runs over a ReplicaGraph, in this order (each its own file, each pinned by a
// golden text of the graph it leaves: tests/strategies/golden_test.cc):
//   1. clone_per_replica         strategies/clone_replicas.cc
//   2. split_batch_inputs        strategies/clone_replicas.cc
//   3. synchronise_batch_norm    strategies/batch_norm_sync.cc        (with sync_batch_norm only)
//   4. weight_gradient_seeds     strategies/gradient_seeds.cc
//   5. aggregate_state           strategies/state_aggregation.cc
//   6. aggregate_gradients       strategies/gradient_aggregation.cc   (or, with sharded optimizer
//      shard_optimizer_updates   strategies/sharded_updates.cc         state, this one instead)
//   7. finish_signature          strategies/replicate.cc
//   8. report_metrics            strategies/replica_metrics.cc
// Each returns an error naming what it cannot rewrite, and leaves what the next one reads.
#pragma once

#include "strategies/replica_graph.h"

namespace mirra::strategies {

// Clones the program's nodes in topological order: a node Classification::replicated marks once per
// replica as replica_<r>/<name> on device r, any other once under its own name on the host. A clone
// reads its replica's clones (or the one copy); a node that exists once reads the one copy, or
// replica 0's of a value every replica holds alike. Sets copies and copies_end.
graph::Status clone_per_replica(ReplicaGraph& r);

// Splits each batch input on the host (SplitBatch, TensorFlow's rule: shares differ by at most one
// example, the first B mod N replicas take the larger, a share may be empty) and has each replica's
// clones read their share; nodes that exist once go on reading the whole batch. Where the replicas
// feed their batches (ReplicationPlan::replicas_feed_their_batches), each one's placeholder is its
// share. Sets shares.
graph::Status split_batch_inputs(ReplicaGraph& r);

// With ReplicationPlan::sync_batch_norm: every replica's batch normalisation in training mode takes
// the mean and variance of the whole batch (two all-reduces per layer forward), as a
// SyncFusedBatchNorm, and its gradient the sums of the whole batch (one all-reduce per layer
// backward). Errors: 16-bit activations.
graph::Status synchronise_batch_norm(ReplicaGraph& r);

// Multiplies each replica's seed of its gradients by its share of the global batch (Note [Batch
// shares]), or with accumulation by its share alone, the accumulated examples dividing later (Note
// [Gradient accumulation]). Sets global_batch and examples.
graph::Status weight_gradient_seeds(ReplicaGraph& r);

// Has each write of state from the replicas' own values (Classification::state_write) read the
// combination its variable's aggregation names (ops::VariableAggregation): the sum or mean over the
// replicas (an AllReduce, across workers too; under CentralStorage, whose write exists once, a sum on
// the host), or the first replica's (across workers, a Broadcast from the first worker's). A write of
// a variable whose aggregation is none is an error naming the two. Under Mirrored a variable
// synchronised on read (ops::VariableSynchronization::on_read) is instead written by each replica
// from its own values, and the synchronize target (one all-reduce of the mean per dtype, then an
// Assign to every copy) combines the copies when something outside the step reads them. Sets
// synchronize.
graph::Status aggregate_state(ReplicaGraph& r);

// Mirrored: sums the replicas' gradients by buckets (strategies/gradient_buckets.h) in the order they
// become ready, each bucket's collective where the plan's AllReducePlan says, through its bucket hook
// (strategies/bucket_hooks.h: bf16 compression), chained in one fixed order; CentralStorage: a sum
// per gradient on the host. Every consumer of a raw replica gradient reads the aggregate instead.
// Sets aggregated.
graph::Status aggregate_gradients(ReplicaGraph& r);

// Sharded optimizer state (ZeRO stage 1, strategies/sharded_updates.h) in place of
// aggregate_gradients: the gradients are reduce-scattered, each replica updates its share and the
// shares are joined into every replica's variables. Sets aggregated (replica 0's share) and writes.
graph::Status shard_optimizer_updates(ReplicaGraph& r);

// The metrics of the global batch on the host: the loss's mean over the batch from the replicas'
// summed elements over the elements they average, the rest of the loss built again around it, the
// correct counts summed; across workers, summed across them first. Sets the result's loss and
// correct count; with report_each_replica, also each replica's own (its share's alone) in `reported`.
graph::Status report_metrics(ReplicaGraph& r);

}  // namespace mirra::strategies
