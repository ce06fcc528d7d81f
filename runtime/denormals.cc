// FTZ and DAZ through MXCSR (x86-64), set while the arena captures its floating-point mode.
#include "runtime/denormals.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace mirra::runtime {

std::unique_ptr<oneapi::tbb::task_arena> make_task_arena(int threads, bool flush_denormals) {
  auto arena = std::make_unique<oneapi::tbb::task_arena>(threads);
#if defined(__x86_64__)
  constexpr unsigned kFlushBits = 0x8040;  // FTZ (bit 15) and DAZ (bit 6)
  const unsigned previous = _mm_getcsr();
  if (flush_denormals) _mm_setcsr(previous | kFlushBits);
  arena->initialize();
  _mm_setcsr(previous);
#else
  arena->initialize();
#endif
  return arena;
}

}  // namespace mirra::runtime
