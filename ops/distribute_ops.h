// The ops a distribution strategy inserts besides the collectives (ops/collective_ops.h): SplitBatch
// (cut a global batch into per-replica shares on the host, TensorFlow's rule: sizes differ by at most
// one, the first B mod N replicas get the larger share, a share may be empty) and DimSize (a dim of a
// tensor at run time).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// The first dim of `x` in `replicas` shares, as views of x's buffer.
std::vector<graph::ValueRef> split_batch(graph::Builder& b, graph::ValueRef x, int64_t replicas);

// Dim `axis` of x as an i64 scalar.
graph::ValueRef dim_size(graph::Builder& b, graph::ValueRef x, int64_t axis);

// The share of replica r of a batch of `batch` examples over `replicas` (TensorFlow's rule).
int64_t replica_share(int64_t batch, int64_t replicas, int64_t r);

}  // namespace mirra::ops
