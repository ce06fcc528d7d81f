// The copy floor: a device-to-device cudaMemcpyAsync on gpu:0, timed with CUDA events.
#include <algorithm>

#include "bench/gpu_floors.h"
#include "runtime/cuda/cuda_status.h"

namespace mirra::bench {

graph::Expected<double> device_copy_gbps(int64_t bytes, int repetitions) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  MIRRA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* from = nullptr;
  void* to = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  graph::Status status = runtime::cuda::check(cudaMalloc(&from, static_cast<size_t>(bytes)), "cudaMalloc");
  if (status.ok()) status = runtime::cuda::check(cudaMalloc(&to, static_cast<size_t>(bytes)), "cudaMalloc");
  if (status.ok()) status = runtime::cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  if (status.ok()) status = runtime::cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  if (status.ok()) status = runtime::cuda::check(cudaMemsetAsync(from, 0, static_cast<size_t>(bytes), stream), "cudaMemsetAsync");
  float best_ms = 1e30f;
  for (int r = 0; status.ok() && r <= repetitions; ++r) {  // the first run warms up
    status = runtime::cuda::check(cudaEventRecord(start, stream), "cudaEventRecord");
    if (status.ok()) {
      status = runtime::cuda::check(cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream),
                                    "cudaMemcpyAsync");
    }
    if (status.ok()) status = runtime::cuda::check(cudaEventRecord(stop, stream), "cudaEventRecord");
    if (status.ok()) status = runtime::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    if (status.ok()) status = runtime::cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (status.ok() && r > 0) best_ms = std::min(best_ms, ms);
  }
  if (start != nullptr) (void)cudaEventDestroy(start);
  if (stop != nullptr) (void)cudaEventDestroy(stop);
  (void)cudaFree(from);
  (void)cudaFree(to);
  (void)cudaStreamDestroy(stream);
  if (!status.ok()) return status;
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(best_ms) * 1e-3) / 1e9;
}

}  // namespace mirra::bench
