// serve_asynchronously: an asynchronous parameter server's training (strategies::WorkerLoop): a thread
// per worker serves that worker's steps as they come, so that no worker waits for another. Reads of
// the variables (copied before they are sent) share the server's lock; an update holds it alone, so a
// worker never receives a variable half written; the sends and receives hold no lock and run outside
// the session (Note [Transfers outside the session]), so a worker that is slow, stopped or gone holds
// up no other. A worker whose step fails (a deadline passed: it died or stalled) is lost: its loop
// ends, the others go on.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/status.h"
#include "runtime/collectives/communicator.h"
#include "runtime/session.h"
#include "strategies/parameter_server.h"

namespace mirra::runner {

struct ServedWorker {
  int task = 0;
  int64_t steps = 0;      // served in full
  graph::Status status;   // why it was lost; ok when every step was served
};

// Serves `steps` steps of every loop's worker through `session` (the server's part) and `transfers`
// (the cluster's), each loop on a thread of its own; returns when every loop ended, in the loops' order.
std::vector<ServedWorker> serve_asynchronously(runtime::Session& session, runtime::Communicator& transfers,
                                               const std::vector<strategies::WorkerLoop>& loops, int64_t steps);

}  // namespace mirra::runner
