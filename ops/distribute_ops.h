// The ops a distribution strategy inserts: SplitBatch (cut a global batch into per-replica shares on
// the host, TensorFlow's rule: sizes differ by at most one, the first B mod N replicas get the larger
// share, a share may be empty), AllReduce (sum or mean of one bucket of gradients across all replicas,
// every replica receiving bitwise-identical values), ReduceScatter (each replica receives only its share
// of the sum, for sharded optimizer state), Broadcast (one value copied to every replica),
// AllGather (all replicas' values stacked along dim 0, for every replica) and DimSize (a dim of a
// tensor at run time). A collective is one node over all replicas' buffers whose asynchronous kernel
// calls the session's runtime::Communicator (its `implementation` attr; "auto": the session's first)
// once per replica, keyed by the node's name and the step, with a deadline of `timeout_ms`. Devices
// that meet among themselves as ranks, a node each, use ops/peer_collective_ops.h instead.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// Which collective implementation a node calls, and how long it waits for every replica to arrive
// (0: no deadline).
struct CollectiveOptions {
  std::string implementation = "auto";
  int64_t timeout_ms = 300'000;
};

// The first dim of `x` in `replicas` shares, as views of x's buffer.
std::vector<graph::ValueRef> split_batch(graph::Builder& b, graph::ValueRef x, int64_t replicas);

// `values` holds the bucket of every replica in turn: replica r's j-th tensor is values[r * k + j], for
// k = values.size() / replicas. Output r * k + j is the sum (or mean) over r' of values[r' * k + j].
std::vector<graph::ValueRef> all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                        std::string_view reduction = "sum", const CollectiveOptions& options = {});

// Which of `workers` worker processes a graph is the part of, for the collectives that span them
// (ReduceScatter and AllGather, whose shares depend on it; runtime::worker_share).
struct WorkerPart {
  int64_t worker = 0;
  int64_t workers = 1;
};

// `values` holds a bucket per replica as all_reduce's does: replica r's j-th tensor is values[r * k + j].
// Output r * k + j is elements [first_r, first_r + share_r) of the flattened sum (or mean) over
// replicas of their j-th tensors, a rank-1 tensor, where share_r = replica_share(elements, replicas, r)
// and first_r is the sum of the earlier shares. Across workers it is worker `part.worker`'s part of
// share r of the sum over every worker's replicas (runtime::worker_share).
std::vector<graph::ValueRef> reduce_scatter(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                            std::string_view reduction = "sum", const CollectiveOptions& options = {},
                                            const WorkerPart& part = {});

// A copy of x for each of `replicas` replicas.
std::vector<graph::ValueRef> broadcast(graph::Builder& b, graph::ValueRef x, int64_t replicas,
                                       const CollectiveOptions& options = {});
// `values` holds a bucket per replica (replica r's j-th tensor is values[r * k + j]); output r * k + j
// is every replica's j-th tensor concatenated along dim 0 in replica order. Across workers output j
// has rows[j] rows, of which replica r's j-th tensor is its part (as reduce_scatter cuts them), and
// the other workers' replicas bring the rest.
std::vector<graph::ValueRef> all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                        const CollectiveOptions& options = {}, const WorkerPart& part = {},
                                        std::vector<int64_t> rows = {});

// Dim `axis` of x as an i64 scalar.
graph::ValueRef dim_size(graph::Builder& b, graph::ValueRef x, int64_t axis);

// The share of replica r of a batch of `batch` examples over `replicas` (TensorFlow's rule).
int64_t replica_share(int64_t batch, int64_t replicas, int64_t r);

}  // namespace mirra::ops
