// The ops a distribution strategy inserts: SplitBatch (cut a global batch into per-replica shares on
// the host, TensorFlow's rule: sizes differ by at most one, the first B mod N replicas get the larger
// share, a share may be empty), AllReduce (sum or mean of one bucket of gradients across all replicas,
// every replica receiving bitwise-identical values), Broadcast (one value copied to every replica),
// AllGather (all replicas' values stacked along dim 0, for every replica) and DimSize (a dim of a
// tensor at run time). The collectives are single nodes over all replicas' buffers: in one process
// they run once their inputs are ready and never wait for peers.
#pragma once

#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// The first dim of `x` in `replicas` shares, as views of x's buffer.
std::vector<graph::ValueRef> split_batch(graph::Builder& b, graph::ValueRef x, int64_t replicas);

// `values` holds the bucket of every replica in turn: replica r's j-th tensor is values[r * k + j], for
// k = values.size() / replicas. Output r * k + j is the sum (or mean) over r' of values[r' * k + j].
std::vector<graph::ValueRef> all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                        std::string_view reduction = "sum");

// A copy of x for each of `replicas` replicas.
std::vector<graph::ValueRef> broadcast(graph::Builder& b, graph::ValueRef x, int64_t replicas);
// values[r] is replica r's; every output is their concatenation along dim 0 in replica order.
std::vector<graph::ValueRef> all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& values);

// Dim `axis` of x as an i64 scalar.
graph::ValueRef dim_size(graph::Builder& b, graph::ValueRef x, int64_t axis);

// The share of replica r of a batch of `batch` examples over `replicas` (TensorFlow's rule).
int64_t replica_share(int64_t batch, int64_t replicas, int64_t r);

}  // namespace mirra::ops
