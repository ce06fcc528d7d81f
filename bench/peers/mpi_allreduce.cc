// Peer of `mirra bench allreduce`: OpenMPI's MPI_Allreduce (float sum, in place) between processes
// on this host, best of several runs per size. Prints one JSON line per size from rank 0.
//   mpirun --allow-run-as-root --oversubscribe -np 2 mirra-mpi-allreduce-peer 1 4 16 64 256
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  for (int arg = 1; arg < argc; ++arg) {
    const long mib = std::strtol(argv[arg], nullptr, 10);
    const size_t count = static_cast<size_t>(mib) << 20 >> 2;
    std::vector<float> buffer(count, static_cast<float>(rank + 1));
    double best = 1e30;
    for (int rep = 0; rep < 6; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double seconds = MPI_Wtime() - start;
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (rep > 0) best = std::min(best, seconds);
    }
    if (rank == 0) std::printf("{\"ranks\":%d,\"mib\":%ld,\"ms\":%.3f}\n", ranks, mib, best * 1e3);
  }
  MPI_Finalize();
  return 0;
}
