// A build without MPI: no multi-worker collective.
#include "runtime/collectives/worker_communicator.h"

namespace mirra::runtime {

graph::Expected<std::shared_ptr<WorkerCommunicator>> open_mpi_communicator() {
  return graph::unavailable("this mirra was built without MPI (install libopenmpi-dev and rebuild for multi-worker training)");
}

bool built_with_mpi() { return false; }

}  // namespace mirra::runtime
