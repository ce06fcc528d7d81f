// The cross-worker all-reduce benchmark, mirra's side, run under mpirun: AllReduce(SUM) of f32 buffers
// of each size through a Session on every worker, as multi_worker_mirrored runs it (local replicas
// summed in process, then MPI_Iallreduce across workers by the workers' collective), timed per run
// as the slowest worker's node time, best of several. bench/all_reduce_vs_mpi.py --across-workers runs it next
// to raw MPI_Allreduce between the same processes (bench/peers/mpi_allreduce.cc).
//
//   mpirun -np 2 mirra bench allreduce --across-workers --replicas 1 --sizes-mib 1,4,16,64
#pragma once

#include <nlohmann/json.hpp>

#include "bench/all_reduce_bandwidth.h"
#include "graph/status.h"

namespace mirra::bench {

// One JSON object on worker 0, nothing elsewhere (null); an error when MPI is missing.
graph::Expected<nlohmann::json> run_worker_all_reduce(const AllReduceBandwidthOptions& options);

}  // namespace mirra::bench
