// gemm: float through oneDNN's sgemm, double through OpenBLAS, chunk by chunk; a B whose rows would share
// cache sets in oneDNN's AVX2 kernel is repacked first.
#include "ops/cpu/blas.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "graph/check.h"
#include "ops/cpu/dnnl_engine.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

namespace {

// C block = op(A) rows * op(B) columns, with leading dims for the full matrices.
void gemm_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                int64_t ldb, float* c, int64_t ldc) {
  // oneDNN's JIT sgemm (AVX-512 where the CPU has it) beats OpenBLAS's on the shapes training makes
  // (10% on a whole MLP or CNN step); one thread inside, as the chunks are already spread over oneTBB.
  dnnl_status_t status = dnnl_success;
  with_dnnl_threads(1, [&] {
    status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  });
  MIRRA_CHECK(status == dnnl_success, "dnnl_sgemm rejected a product the caller checked");
}

void gemm_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c,
              static_cast<int>(ldc));
}

// Whether B, untransposed with `ldb` elements a row, is copied before the product. oneDNN's sgemm
// without AVX-512 (its AVX2 kernels, in oneDNN 2.6 and 3.2 alike) reads such a B in place when it is
// 32-byte aligned and the product is thin (a batch of 128, or a chunk). With rows a multiple of 2 KiB
// apart they fall into the same cache sets, and the product runs at half speed: the CNN's dense
// layer, [128, 3136] x [3136, 1024], at 44 GFLOP/s instead of 90 on a Zen 3 core. With AVX-512,
// oneDNN copies B itself for such leading dimensions. A B over kMostRepackedBytes is left as it is,
// so that no product holds a large operand twice.
inline constexpr int64_t kMostRepackedBytes = int64_t{64} << 20;

template <class T>
bool repacks_b(bool transpose_b, int64_t k, int64_t ldb) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    static const bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
    return !avx512 && !transpose_b && ldb % 512 == 0 && k * ldb * static_cast<int64_t>(sizeof(T)) <= kMostRepackedBytes;
  }
}

}  // namespace

template <class T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c,
          const std::shared_ptr<runtime::Allocator>& scratch) {
  static std::once_flag single_threaded_blas;
  std::call_once(single_threaded_blas, [] { openblas_set_num_threads(1); });
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill_n(c, m * n, T(0));
    return;
  }
  const int64_t lda = std::max<int64_t>(transpose_a ? m : k, 1);
  int64_t ldb = std::max<int64_t>(transpose_b ? k : n, 1);
  runtime::Tensor repacked;
  if (repacks_b<T>(transpose_b, k, ldb)) {
    const int64_t padded = ldb + 64 / static_cast<int64_t>(sizeof(T));  // rows a cache line further apart
    repacked = runtime::Tensor::empty(scratch, graph::dtype_of<T>(), runtime::TensorShape{k, padded});
    T* copy = repacked.mutable_data<T>();
    parallel_for(k, std::max<int64_t>(1, kElementwiseGrain / ldb), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) std::memcpy(copy + row * padded, b + row * ldb, ldb * sizeof(T));
    });
    b = copy;
    ldb = padded;
  }
  for_each_product_chunk(m, n, k, [&](int64_t first, int64_t count, bool rows) {
    if (rows) {
      // Row `first` of op(A): with A transposed it is column `first` of A.
      const T* a_rows = transpose_a ? a + first : a + first * lda;
      gemm_block(transpose_a, transpose_b, count, n, k, a_rows, lda, b, ldb, c + first * n, n);
    } else {
      // Column `first` of op(B): with B transposed it is row `first` of B.
      const T* b_columns = transpose_b ? b + first * ldb : b + first;
      gemm_block(transpose_a, transpose_b, m, count, k, a, lda, b_columns, ldb, c + first, n);
    }
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*,
                          const std::shared_ptr<runtime::Allocator>&);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const double*, const double*, double*,
                           const std::shared_ptr<runtime::Allocator>&);

}  // namespace mirra::ops::cpu
