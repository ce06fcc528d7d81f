// update_looked_up_rows: each update of an embedding table made row-wise. The gradient of a variable
// read only through lookups (GatherV2 along axis 0) is the scatter of the lookups' gradient rows into
// a zero table (UnsortedSegmentSum), or a sum of such scatters (replicas', workers'), perhaps scaled
// by a scalar or checked for finite values on the way; the update then reads a table of zeros but
// for a few rows. This pass hands the update those rows and their indices instead
// (ops/sparse_optimizer_ops.h), the scalings and checks applied to the rows, the sums concatenated:
//   - gradient descent always (it computes the same values, without the table-sized gradient);
//   - momentum and Adam when their `lazy` attribute asks (ops::Optimizer::lazy), which changes what
//     they compute: the rows not looked up keep their values and slots.
// Not an update with weight decay (which changes every row), nor yet one on a GPU (whose row-wise
// kernels have not run on one; a lazy update there is refused). A lazy update of a variable read by
// lookups alone whose gradient reaches it another way (summed whole by Mirrored's all-reduce) is an
// error naming the variable: it would update every row.
// Strategy::distribute runs it on every strategy's result, so under ParameterServer the servers
// apply the rows the workers send.
#pragma once

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace mirra::ops {

// Leaves the replaced updates and gradients unread (strategies::prune removes them).
graph::Status update_looked_up_rows(graph::Graph& g, const graph::OpRegistry& schemas);

}  // namespace mirra::ops
