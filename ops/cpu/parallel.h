// parallel_for over [0, n) in chunks of at least `grain`, on the calling thread's oneTBB arena. Small
// ranges run inline. Each index is visited exactly once, so element-wise loops stay deterministic.
// The tasks may touch what the caller may (a device's memory inside its stream's work).
#pragma once

#include <cstdint>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include "runtime/memory_space.h"

namespace mirra::ops::cpu {

inline constexpr int64_t kElementwiseGrain = 16384;

template <class Body>
void parallel_for(int64_t n, int64_t grain, const Body& body) {
  if (n <= 0) return;
  if (n <= grain) {
    body(int64_t{0}, n);
    return;
  }
  oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<int64_t>(0, n, grain),
                            runtime::with_memory_access_of_caller(
                                [&](const oneapi::tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); }));
}

}  // namespace mirra::ops::cpu
