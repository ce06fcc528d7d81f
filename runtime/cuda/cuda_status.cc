// CUDA, cuBLAS and cuDNN results as Status.
#include "runtime/cuda/cuda_status.h"

#include <string>

#include "runtime/device.h"

namespace mirra::runtime::cuda {

namespace {

// The function a checked call expression calls: "cudaMalloc(&block, bytes)" -> "cudaMalloc".
std::string function_of(const char* call) {
  const std::string text(call);
  return text.substr(0, text.find('('));
}

std::string describe(const char* call, const char* name, const char* what) {
  return function_of(call) + " failed: " + name + " (" + what + ")";
}

}  // namespace

graph::Status check(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return graph::Status();
  // Clears a non-sticky error so that it does not surface again at the next call.
  (void)cudaGetLastError();
  const std::string message = describe(call, cudaGetErrorName(result), cudaGetErrorString(result));
  switch (result) {
    case cudaErrorMemoryAllocation: return graph::resource_exhausted(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable: return graph::unavailable(message);
    default: return graph::internal_error(message);
  }
}

graph::Status check(cublasStatus_t result, const char* call) {
  if (result == CUBLAS_STATUS_SUCCESS) return graph::Status();
  const std::string message = describe(call, cublasGetStatusName(result), cublasGetStatusString(result));
  if (result == CUBLAS_STATUS_ALLOC_FAILED) return graph::resource_exhausted(message);
  if (result == CUBLAS_STATUS_NOT_INITIALIZED) return graph::unavailable(message);
  return graph::internal_error(message);
}

graph::Status check(cudnnStatus_t result, const char* call) {
  if (result == CUDNN_STATUS_SUCCESS) return graph::Status();
  // cuDNN keeps a longer explanation of its last error.
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string message = function_of(call) + " failed: " + cudnnGetErrorString(result);
  if (detail[0] != '\0') message += " (" + std::string(detail) + ")";
  if (result == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      result == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    return graph::resource_exhausted(message);
  }
  if (result == CUDNN_STATUS_NOT_INITIALIZED || result == CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED) {
    return graph::unavailable(message);
  }
  return graph::internal_error(message);
}

template <class Result>
void throw_if_error(Result result, const char* call) {
  graph::Status status = check(result, call);
  if (!status.ok()) throw DeviceError(std::move(status));
}

template void throw_if_error(cudaError_t, const char*);
template void throw_if_error(cublasStatus_t, const char*);
template void throw_if_error(cudnnStatus_t, const char*);

}  // namespace mirra::runtime::cuda
