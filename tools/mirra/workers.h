// What a multi-worker run (multi_worker_mirrored) does on every worker before its first step, over
// the workers' collective: the start-up agreement, the collective groups, and worker 0's state for
// everyone. Workers are processes started by mpirun (or srun through MPI); worker 0 speaks for the run.
//
//   MIRRA_RETURN_IF_ERROR(agree_with_worker_0(workers, config, distributed.graph));
//   MIRRA_RETURN_IF_ERROR(workers.prepare(collective_groups(distributed.graph)));
//   MIRRA_RETURN_IF_ERROR(take_worker_0_state(workers, session, position, ...));
#pragma once

#include <string>
#include <vector>

#include "runtime/collectives/worker_communicator.h"
#include "runtime/session.h"
#include "serialization/checkpoint.h"
#include "tools/mirra/run_config.h"

namespace mirra::runner {

// The groups of the graph's collective nodes, each once, in graph order (the same on every worker that
// agrees).
std::vector<std::string> collective_groups(const graph::Graph& graph);

// Compares this worker's resolved config (less what may differ between machines: the data path,
// the checkpoint directory, the thread count) and its graph's collective plan (each collective's
// name, op, attributes and operand types, in order) with worker 0's. A difference stops every worker
// with an error that names the first differing worker and line; a worker that does not take part
// within `timeout_s` is deadline_exceeded.
graph::Status agree_with_worker_0(runtime::WorkerCommunicator& workers, const RunConfig& config, const graph::Graph& graph);

// What worker 0 saves, in which every worker takes part: with sharded optimizer state, the shares of
// every worker make the values saved (gather_variables).
struct Worker0Saves {
  bool checkpoints = false;  // it has a checkpoint directory: it checkpoints on the config's schedule
  bool model = false;        // --save: it writes the trained model at the end
};

// Worker 0's variables and training position, and its Worker0Saves, given to every worker, so all
// start from the same values whatever each one loaded (its model file, its checkpoint directory). A
// collective call of every worker; `restored` are the values worker 0 restored (the model file's,
// then its checkpoint's), whose sharded slots it holds only its replicas' shares of.
graph::Expected<Worker0Saves> take_worker_0_state(runtime::WorkerCommunicator& workers, runtime::Session& session,
                                                  serialization::TrainingPosition& position, const std::string& skip_variable,
                                                  double timeout_s, const std::vector<serialization::NamedTensor>& restored,
                                                  Worker0Saves saves);

}  // namespace mirra::runner
