// MatMul on the GPU through cuBLAS. Tensors are row-major and cuBLAS is column-major, so the row-major
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: B and A swap places and keep
// their transpose flags. FP32 products run in FP32 unless the device allows TF32 (GpuOptions). bf16
// and f16 operands run on the tensor cores (cublasGemmEx), summing in f32, into a 16-bit result or,
// with f32_output, an f32 one, as the CPU kernel defines them.
#include <limits>

#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    case DType::f64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

Status matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool ta = ctx.attr<bool>("transpose_a"), tb = ctx.attr<bool>("transpose_b");
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t kb = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (k != kb) return graph::invalid_argument("inner dimensions differ: " + a.type_string() + " x " + b.type_string());
  constexpr int64_t kLimit = std::numeric_limits<int>::max();
  if (m > kLimit || n > kLimit || k > kLimit) {
    return graph::invalid_argument("a dimension of " + a.type_string() + " x " + b.type_string() + " passes cuBLAS's int range");
  }
  const DType out = ctx.attr<bool>("f32_output") ? DType::f32 : a.dtype();
  Tensor& c = ctx.allocate_output(0, out, TensorShape{m, n});
  if (m == 0 || n == 0) return Status();
  if (k == 0) {  // an empty sum
    MIRRA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c.mutable_raw_data(), 0, c.byte_size(), stream_of(ctx)));
    return Status();
  }
  const cublasHandle_t handle = gpu_of(ctx).cublas();
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(ta ? m : k), ldb = static_cast<int>(tb ? k : n);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (a.dtype() == DType::bf16 || a.dtype() == DType::f16) {
    const float one = 1, zero = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cublasGemmEx(handle, op_b, op_a, ni, mi, ki, &one, b.raw_data(), cuda_type(b.dtype()), ldb,
                                            a.raw_data(), cuda_type(a.dtype()), lda, &zero, c.mutable_raw_data(),
                                            cuda_type(out), ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else if (a.dtype() == DType::f32 && gpu_of(ctx).allow_tf32()) {
    const float one = 1, zero = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cublasGemmEx(handle, op_b, op_a, ni, mi, ki, &one, b.data<float>(), CUDA_R_32F, ldb,
                                            a.data<float>(), CUDA_R_32F, lda, &zero, c.mutable_data<float>(), CUDA_R_32F, ni,
                                            CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
  } else if (a.dtype() == DType::f32) {
    const float one = 1, zero = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cublasSgemm(handle, op_b, op_a, ni, mi, ki, &one, b.data<float>(), ldb, a.data<float>(), lda,
                                           &zero, c.mutable_data<float>(), ni));
  } else {
    const double one = 1, zero = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cublasDgemm(handle, op_b, op_a, ni, mi, ki, &one, b.data<double>(), ldb, a.data<double>(),
                                           lda, &zero, c.mutable_data<double>(), ni));
  }
  return Status();
}

}  // namespace

void register_gpu_matmul_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64, DType::bf16, DType::f16});
  kernels.add("MatMul", DeviceKind::gpu, {.fn = matmul_kernel, .dtypes = floats, .operand_dtypes = floats});
}

}  // namespace mirra::ops::cuda
