// What a GPU can do at best, measured with no executor, to hold mirra's GPU figures against: the
// raw kernel-launch rate, the cuBLAS products of the MLP's training step and the device-to-device
// copy rate. Both need the CUDA
// backend and a GPU (bench/cuda/); without them they are unavailable (gpu_floors_without_cuda.cc).
#pragma once

#include <cstdint>

#include "graph/status.h"

namespace mirra::bench {

// Seconds for `launches` back-to-back launches of the one-element Neg kernel on a fresh stream of
// gpu:0, the best of `repetitions`.
graph::Expected<double> raw_launch_seconds(int launches, int repetitions);

// Seconds per step of the benchmark MLP's eight matrix products at `batch`, through cuBLAS alone on
// gpu:0 (f32, TF32 off), over `steps` steps.
graph::Expected<double> mlp_gemm_seconds_per_step(int64_t batch, int steps);

// GB/s of a device-to-device copy of `bytes` on gpu:0 (cudaMemcpyAsync), counting each byte read and
// written (2 x bytes), the best of `repetitions`.
graph::Expected<double> device_copy_gbps(int64_t bytes, int repetitions);

}  // namespace mirra::bench
