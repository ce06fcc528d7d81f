// Checked CUDA, cuBLAS and cuDNN calls: every call's result becomes a Status naming the call and the
// library's own description of the error. Out of device memory is resource_exhausted, a missing
// driver or device is unavailable, anything else internal. The node, op and device are added by
// the executor (Status::with_context).
//
//   MIRRA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream));
//   cuda::throw_if_error(cudaStreamCreate(&stream), "cudaStreamCreate");  // where no Status returns
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "graph/status.h"

namespace mirra::runtime::cuda {

graph::Status check(cudaError_t result, const char* call);
graph::Status check(cublasStatus_t result, const char* call);
graph::Status check(cudnnStatus_t result, const char* call);

// For constructors and copies: throws DeviceError (runtime/device.h) carrying the status.
template <class Result>
void throw_if_error(Result result, const char* call);

}  // namespace mirra::runtime::cuda

#define MIRRA_CUDA_RETURN_IF_ERROR(call) MIRRA_RETURN_IF_ERROR(::mirra::runtime::cuda::check((call), #call))
#define MIRRA_CUDA_THROW_IF_ERROR(call) ::mirra::runtime::cuda::throw_if_error((call), #call)
