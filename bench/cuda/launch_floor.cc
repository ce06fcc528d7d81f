// The raw launch floor: the one-element Neg kernel launched back to back on a stream of gpu:0.
#include <chrono>

#include "bench/gpu_floors.h"
#include "ops/cuda/device_kernels.h"
#include "runtime/cuda/cuda_status.h"

namespace mirra::bench {

graph::Expected<double> raw_launch_seconds(int launches, int repetitions) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  MIRRA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* memory = nullptr;
  graph::Status status = runtime::cuda::check(cudaMalloc(&memory, 2 * sizeof(float)), "cudaMalloc");
  auto* values = static_cast<float*>(memory);
  double best = 1e30;
  for (int r = 0; status.ok() && r <= repetitions; ++r) {  // the first run warms up
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; status.ok() && i < launches; ++i) {
      status = runtime::cuda::check(
          ops::cuda::unary(ops::cuda::UnaryOp::neg, graph::DType::f32, values + i % 2, values + (i + 1) % 2, 1, stream), "unary");
    }
    if (status.ok()) status = runtime::cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (r > 0) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  (void)cudaFree(values);
  (void)cudaStreamDestroy(stream);
  if (!status.ok()) return status;
  return best;
}

}  // namespace mirra::bench
