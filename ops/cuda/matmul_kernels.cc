// MatMul and BatchMatMulV2 on the GPU through cuBLAS. Tensors are row-major and cuBLAS is column-major, so the row-major
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: B and A swap places and keep
// their transpose flags. FP32 products run in FP32 unless the device allows TF32 (GpuOptions). bf16
// and f16 operands run on the tensor cores (cublasGemmEx), summing in f32, into a 16-bit result or,
// with f32_output, an f32 one, as the CPU kernel defines them.
#include <limits>
#include <optional>

#include "ops/cuda/gpu_kernel.h"
#include "ops/kernel_shapes.h"

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

// Whether an operand's matrix for output matrix i is matrix i (its batch is the output's) or always
// matrix 0 (broadcast): then one strided-batched call serves every matrix, with stride 0 for it.
std::optional<int64_t> batch_stride(const std::vector<int64_t>& matrices, int64_t matrix_size) {
  bool full = true, broadcast = true;
  for (size_t i = 0; i < matrices.size(); ++i) {
    full = full && matrices[i] == static_cast<int64_t>(i);
    broadcast = broadcast && matrices[i] == 0;
  }
  if (full) return matrix_size;
  if (broadcast) return 0;
  return std::nullopt;
}

// `count` products C_i = op(A_i) op(B_i), row-major, as matmul_kernel's swap makes them column-major.
Status strided_batched_gemm(const KernelContext& ctx, DType in, DType out, bool ta, bool tb, int m, int n, int k,
                            const void* a, int64_t stride_a, const void* b, int64_t stride_b, void* c, int64_t stride_c,
                            int count) {
  const cublasHandle_t handle = gpu_of(ctx).cublas();
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = ta ? m : k, ldb = tb ? k : n;
  if (in == DType::f64) {
    const double one = 1, zero = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, &one, static_cast<const double*>(b), ldb,
                                                         stride_b, static_cast<const double*>(a), lda, stride_a, &zero,
                                                         static_cast<double*>(c), n, stride_c, count));
    return Status();
  }
  const float one = 1, zero = 0;
  if (in == DType::f32 && !gpu_of(ctx).allow_tf32()) {
    MIRRA_CUDA_RETURN_IF_ERROR(cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, &one, static_cast<const float*>(b), ldb,
                                                         stride_b, static_cast<const float*>(a), lda, stride_a, &zero,
                                                         static_cast<float*>(c), n, stride_c, count));
    return Status();
  }
  const cublasComputeType_t compute = in == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MIRRA_CUDA_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(handle, op_b, op_a, n, m, k, &one, b, cuda_type(in), ldb, stride_b, a,
                                                        cuda_type(in), lda, stride_a, &zero, c, cuda_type(out), n, stride_c,
                                                        count, compute, CUBLAS_GEMM_DEFAULT));
  return Status();
}

// BatchMatMulV2: one strided-batched call when each operand's batch is the output's or broadcast
// whole; otherwise a call per output matrix, on the matrices broadcasting pairs with it.
Status batch_matmul_kernel(KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const BatchMatMulGeometry g, batch_matmul_geometry(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  constexpr int64_t kLimit = std::numeric_limits<int>::max();
  if (g.m > kLimit || g.n > kLimit || g.k > kLimit || g.batch > kLimit) {
    return graph::invalid_argument("a dimension of " + x.type_string() + " x " + y.type_string() + " passes cuBLAS's int range");
  }
  const DType out = ctx.attr<bool>("f32_output") ? DType::f32 : x.dtype();
  Tensor& c = ctx.allocate_output(0, out, g.output);
  if (c.num_elements() == 0) return Status();
  if (g.k == 0) {
    MIRRA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(c.mutable_raw_data(), 0, c.byte_size(), stream_of(ctx)));
    return Status();
  }
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int64_t x_size = g.m * g.k, y_size = g.k * g.n, c_size = g.m * g.n;
  const std::optional<int64_t> x_stride = batch_stride(g.x_batch, x_size), y_stride = batch_stride(g.y_batch, y_size);
  if (x_stride && y_stride) {
    return strided_batched_gemm(ctx, x.dtype(), out, g.adj_x, g.adj_y, m, n, k, x.raw_data(), *x_stride, y.raw_data(), *y_stride,
                                c.mutable_raw_data(), c_size, static_cast<int>(g.batch));
  }
  const size_t in_bytes = graph::dtype_size(x.dtype()), out_bytes = graph::dtype_size(out);
  for (int64_t i = 0; i < g.batch; ++i) {
    MIRRA_RETURN_IF_ERROR(strided_batched_gemm(
        ctx, x.dtype(), out, g.adj_x, g.adj_y, m, n, k,
        static_cast<const char*>(x.raw_data()) + static_cast<size_t>(g.x_batch[static_cast<size_t>(i)] * x_size) * in_bytes, 0,
        static_cast<const char*>(y.raw_data()) + static_cast<size_t>(g.y_batch[static_cast<size_t>(i)] * y_size) * in_bytes, 0,
        static_cast<char*>(c.mutable_raw_data()) + static_cast<size_t>(i * c_size) * out_bytes, 0, 1));
  }
  return Status();
}

}  // namespace

void register_gpu_matmul_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64, DType::bf16, DType::f16});
  kernels.add("MatMul", DeviceKind::gpu, {.fn = matmul_kernel, .dtypes = floats, .operand_dtypes = floats});
  kernels.add("BatchMatMulV2", DeviceKind::gpu, {.fn = batch_matmul_kernel, .dtypes = floats, .operand_dtypes = floats});
}

}  // namespace mirra::ops::cuda
