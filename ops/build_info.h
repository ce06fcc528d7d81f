// What this build of mirra is and has: its version, whether it has the CUDA backend (with the CUDA
// runtime, cuBLAS, cuDNN and NCCL versions it runs with), whether it has MPI for multi-worker runs,
// and the versions of oneDNN (and what it parallelises with), oneTBB and OpenBLAS it runs with.
// `mirra --version` prints it.
//
//   mirra 0.1.0
//   CUDA backend: off
//   MPI (multi_worker_mirrored): on
//   oneDNN 2.6.3 (OpenMP), oneTBB 2021.8.0, OpenBLAS 0.3.21
#pragma once

#include <string>

namespace mirra::ops {

// Lines as above, each ended by a newline.
std::string build_info();

// The oneDNN this build runs with, as in build_info: "oneDNN 2.6.3 (OpenMP)".
std::string onednn_description();

}  // namespace mirra::ops
