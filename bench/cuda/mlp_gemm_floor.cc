// The floor of an MLP training step on a GPU: the step's eight matrix products (three forward; two
// input gradients and three weight gradients backward) of the benchmark MLP, 784-256-128-10, run
// through cuBLAS alone, back to back, with no other kernel and no executor.
#include <chrono>

#include <cublas_v2.h>

#include "bench/gpu_floors.h"
#include "runtime/cuda/cuda_status.h"

namespace mirra::bench {

namespace {

// One row-major product C[m, n] = op(A) op(B) with k inner, as the MatMul kernel issues it.
struct Product {
  bool transpose_a, transpose_b;
  int m, n, k;
};

}  // namespace

graph::Expected<double> mlp_gemm_seconds_per_step(int64_t batch, int steps) {
  const int b = static_cast<int>(batch);
  // Forward: x[b,784] w1[784,256], h1[b,256] w2[256,128], h2[b,128] w3[128,10]. Backward: dh2 =
  // d3 w3^T, dw3 = h2^T d3, dh1 = d2 w2^T, dw2 = h1^T d2, dw1 = x^T d1.
  const Product products[] = {{false, false, b, 256, 784}, {false, false, b, 128, 256}, {false, false, b, 10, 128},
                              {false, true, b, 128, 10},   {true, false, 128, 10, b},   {false, true, b, 256, 128},
                              {true, false, 256, 128, b},  {true, false, 784, 256, b}};
  MIRRA_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cublasHandle_t handle = nullptr;
  MIRRA_CUDA_RETURN_IF_ERROR(cublasCreate(&handle));
  void* memory = nullptr;
  const size_t floats = static_cast<size_t>(b) * 784 * 3 + 784 * 256 * 2;  // room for any operand
  graph::Status status = runtime::cuda::check(cudaMalloc(&memory, 3 * floats * sizeof(float)), "cudaMalloc");
  if (status.ok()) status = runtime::cuda::check(cudaMemset(memory, 0, 3 * floats * sizeof(float)), "cudaMemset");
  auto* a = static_cast<float*>(memory);
  float* bm = a + floats;
  float* c = bm + floats;
  const float one = 1, zero = 0;
  const auto run_step = [&] {
    for (const Product& p : products) {
      if (!status.ok()) return;
      status = runtime::cuda::check(
          cublasSgemm(handle, p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.n, p.m, p.k,
                      &one, bm, p.transpose_b ? p.k : p.n, a, p.transpose_a ? p.m : p.k, &zero, c, p.n),
          "cublasSgemm");
    }
  };
  for (int i = 0; i < 5; ++i) run_step();  // warm-up
  if (status.ok()) status = runtime::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) run_step();
  if (status.ok()) status = runtime::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  (void)cudaFree(memory);
  (void)cublasDestroy(handle);
  if (!status.ok()) return status;
  return seconds / steps;
}

}  // namespace mirra::bench
