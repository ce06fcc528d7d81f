// gemm over OpenBLAS.
#include "ops/cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "ops/cpu/parallel.h"

namespace mirra::ops::cpu {

namespace {

void gemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f,
              c, static_cast<int>(std::max<int64_t>(n, 1)));
}

void gemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
               int64_t ldb, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c,
              static_cast<int>(std::max<int64_t>(n, 1)));
}

}  // namespace

template <class T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  static std::once_flag single_threaded_blas;
  std::call_once(single_threaded_blas, [] { openblas_set_num_threads(1); });
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill_n(c, m * n, T(0));
    return;
  }
  const int64_t lda = std::max<int64_t>(transpose_a ? m : k, 1);
  const int64_t ldb = std::max<int64_t>(transpose_b ? k : n, 1);
  // Chunks of about 2 MFLOP, at least 8 rows: big enough to amortise a call, small enough to share.
  const int64_t rows_per_chunk = std::max<int64_t>(8, (int64_t{1} << 20) / std::max<int64_t>(n * k, 1));
  const int64_t chunks = (m + rows_per_chunk - 1) / rows_per_chunk;
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t row = chunk * rows_per_chunk;
      const int64_t rows = std::min(rows_per_chunk, m - row);
      // Row `row` of op(A): with A transposed it is column `row` of A.
      const T* a_rows = transpose_a ? a + row : a + row * lda;
      gemm_rows(transpose_a, transpose_b, rows, n, k, a_rows, lda, b, ldb, c + row * n);
    }
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const double*, const double*, double*);

}  // namespace mirra::ops::cpu
