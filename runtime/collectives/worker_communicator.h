// WorkerCommunicator: the Communicator of a multi-worker run, whose participants are the local replicas
// of every worker process (launched by mpirun, or srun through MPI). A call meets the local
// participants first and reduces across them in this process; then one thread of the collective's
// own, the only one that talks to the other workers, combines the result across workers without
// blocking any executor thread, and completes the local participants. Besides the Communicator
// operations it offers what a multi-worker run needs before its first step: a communicator per
// collective group (prepare), exchanging bytes (the start-up agreement), and ending every worker at
// once after a failure (abort).
//
//   auto workers = runtime::open_mpi_communicator();       // MPI_Init; rank and size from MPI itself
//   MIRRA_RETURN_IF_ERROR((*workers)->prepare(groups));  // the graph's collective nodes, same list everywhere
//   session options: .communicators = {*workers}           // the collectives' ranks name "mpi"
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives/communicator.h"

namespace mirra::runtime {

// The phases of one cross-worker all-reduce, for traces (steady_clock nanoseconds): the local
// replicas meet and sum in process from `start` to `local_done`; the worker then waits for the
// slowest other worker to reach the collective (`peers_arrived`, as they announce it), and the
// all-reduce across workers ends at `done`.
struct CollectivePhases {
  std::string group;
  int64_t start_ns = 0, local_done_ns = 0, peers_arrived_ns = 0, done_ns = 0;
};

class WorkerCommunicator : public Communicator {
 public:
  // One communication channel per group, made in `groups`' order: every worker must pass the same
  // list (the start-up agreement checks it). Groups need no common order across workers then, and
  // the instances of one group run in order.
  virtual graph::Status prepare(const std::vector<std::string>& groups) = 0;
  // Every worker's `mine`, in rank order; deadline_exceeded when some worker does not take part in time.
  virtual graph::Expected<std::vector<std::string>> exchange(const std::string& mine, CollectiveClock::time_point deadline) = 0;
  // Worker 0's bytes into `bytes` on every worker (the same size everywhere).
  virtual graph::Status broadcast_bytes(std::string& bytes, CollectiveClock::time_point deadline) = 0;
  // Ends this worker and every other with `code`, for a failure the others may be waiting on.
  [[noreturn]] virtual void abort(int code) = 0;

  // Starts (or stops) keeping the phases of every all-reduce (at most the newest 100,000).
  virtual void record_phases(bool on) = 0;
  // The phases kept since the last call, oldest first.
  virtual std::vector<CollectivePhases> take_phases() = 0;
};

// MPI's: the process's rank and size in MPI_COMM_WORLD (a process started without mpirun is rank 0
// of 1). unavailable when MPI cannot start or mirra was built without it. Once per process.
graph::Expected<std::shared_ptr<WorkerCommunicator>> open_mpi_communicator();
bool built_with_mpi();

}  // namespace mirra::runtime
