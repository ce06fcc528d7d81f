// AllReduce, ReduceScatter, AllGather and Broadcast: one participant's part of a collective, a node
// per participant (a rank). Every rank's node names the same `group`; the session numbers the group's
// executions, and the kernel calls a Communicator when it runs: the session's (its `implementation`
// attr, "auto" the first: in process, or MPI across workers), or on GPUs NCCL (ops/cuda/
// nccl_kernels.cc). The all-reduce plan (strategies/all_reduce_plan.h) chooses where the ranks run
// and whether they share one device's memory; the ops are the same whatever it chooses. Send and Recv,
// the two halves of a transfer between tasks, are of the family too; ops::partition_by_task
// (ops/task_partition.h) inserts them.
//
//   for (int64_t r = 0; r < n; ++r) {
//     b.set_device(devices[r]);
//     sums[r] = ops::all_reduce(b, gradients[r], {.group = "bucket_0", .rank = r, .ranks = n});
//   }
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"

namespace mirra::ops {

// Which collective implementation a node calls, and how long it waits for every rank to arrive
// (0: no deadline).
struct CollectiveOptions {
  std::string implementation = "auto";
  int64_t timeout_ms = 300'000;
};

// Rank `rank` of the `ranks` participants of collective `group` in this process. Across W worker
// processes every worker's graph holds the group's ranks 0..ranks-1, and the collective spans all W x
// ranks of them. With `shared_memory`, every rank's node runs on one device (the ranks are replicas
// sharing its memory), which sums their buffers where they are, with no transport and no staging.
struct CollectiveRank {
  std::string group;
  int64_t rank = 0;
  int64_t ranks = 1;
  bool shared_memory = false;
};

// Which of `workers` worker processes a graph is the part of, for the collectives whose shares depend
// on it (ReduceScatter and AllGather; runtime::worker_share).
struct WorkerPart {
  int64_t worker = 0;
  int64_t workers = 1;
};

// Output j is the sum (or mean) over every rank (of every worker) of its values[j]; every rank
// receives the same bits. bf16 values are summed in f32 and rounded once.
std::vector<graph::ValueRef> all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                        const CollectiveRank& rank, std::string_view reduction = "sum",
                                        const CollectiveOptions& options = {});

// Output j is this rank's share of the flattened sum (or mean) over every rank of its values[j]: a
// rank-1 tensor of worker_share(elements, ranks, rank, workers, worker).count elements (the shares
// differ by at most one, the first larger, in rank order; across workers each is cut again among them).
std::vector<graph::ValueRef> reduce_scatter(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                            const CollectiveRank& rank, std::string_view reduction = "sum",
                                            const CollectiveOptions& options = {}, const WorkerPart& part = {});

// Undoes reduce_scatter along dim 0: parts[j] is this rank's rows of a tensor of rows[j] rows (rows
// worker_share(rows[j], ranks, rank, workers, worker)), and output j is every rank's (of every worker)
// joined in order: rows[j] rows with the part's other dims.
std::vector<graph::ValueRef> all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& parts,
                                        const CollectiveRank& rank, std::vector<int64_t> rows,
                                        const CollectiveOptions& options = {}, const WorkerPart& part = {});

// The value x has on participant `root` (across W workers participant p of worker w is w * ranks + p),
// for every rank; x gives this rank's shape and dtype.
graph::ValueRef broadcast(graph::Builder& b, graph::ValueRef x, const CollectiveRank& rank, int64_t root = 0,
                          const CollectiveOptions& options = {});

}  // namespace mirra::ops
