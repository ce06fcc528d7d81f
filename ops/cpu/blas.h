// gemm: row-major C = op(A) * op(B): float through oneDNN's sgemm, double through OpenBLAS. A large product is split
// along the longer side of C in chunks fixed by the shape (never by the thread count) and run over
// oneTBB, with each call single-threaded inside: one scheduler owns the cores, and results do not
// depend on how many threads there are.
#pragma once

#include <cstdint>

namespace mirra::ops::cpu {

template <class T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c);

}  // namespace mirra::ops::cpu
