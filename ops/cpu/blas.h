// Matrix products on the CPU: gemm, row-major C = op(A) * op(B) (float through oneDNN's sgemm, double
// through OpenBLAS), and the chunking every product shares. A large product is split along the longer
// side of C in chunks fixed by the shape (never by the thread count) and run over oneTBB, with each
// call single-threaded inside: one scheduler owns the cores, and results do not depend on how many
// threads there are.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "ops/cpu/parallel.h"
#include "runtime/allocator.h"

namespace mirra::ops::cpu {

// Below this many flops a product runs as one call; above, it is split in chunks of at least
// kMinProductChunk rows or columns (each chunk repacks the other operand, so chunks must not be thin).
inline constexpr int64_t kSplitProductFlops = int64_t{8} << 20;
inline constexpr int64_t kMinProductChunk = 128;
inline constexpr int64_t kMostProductChunks = 8;

// Calls body(first, count, rows) for each chunk of C = [m, n] (rows: the chunk is rows [first,
// first + count) of C; else columns), in parallel over oneTBB.
template <class Body>
void for_each_product_chunk(int64_t m, int64_t n, int64_t k, const Body& body) {
  const bool rows = m >= n;
  const int64_t side = rows ? m : n;
  const int64_t chunks =
      2 * m * n * k < kSplitProductFlops ? 1 : std::clamp<int64_t>(side / kMinProductChunk, 1, kMostProductChunks);
  const int64_t per_chunk = (side + chunks - 1) / chunks;
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * per_chunk;
      const int64_t count = std::min(per_chunk, side - first);
      if (count > 0) body(first, count, rows);
    }
  });
}

// C = op(A) * op(B), with A [m, k] and B [k, n] after their transposes; `scratch` holds temporaries
// (an operand repacked for the kernel).
template <class T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c,
          const std::shared_ptr<runtime::Allocator>& scratch);

}  // namespace mirra::ops::cpu
