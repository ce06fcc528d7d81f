// The array conversions: one loop per direction, cloned per instruction set, split over threads.
#include "ops/cpu/float_conversion.h"

#include "ops/cpu/parallel.h"
#include "runtime/vector_clones.h"

namespace mirra::ops::cpu {

namespace {

// Inlined into each clone below, so it is compiled for that clone's instruction set.
template <class To, class From>
[[gnu::always_inline]] inline void convert_range(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i]);
}

MIRRA_VECTOR_CLONES void to_bfloat16(const float* in, graph::bfloat16* out, int64_t n) { convert_range(in, out, n); }
MIRRA_VECTOR_CLONES void to_float16(const float* in, graph::float16* out, int64_t n) { convert_range(in, out, n); }
MIRRA_VECTOR_CLONES void from_bfloat16(const graph::bfloat16* in, float* out, int64_t n) { convert_range(in, out, n); }
MIRRA_VECTOR_CLONES void from_float16(const graph::float16* in, float* out, int64_t n) { convert_range(in, out, n); }

template <class To, class From>
void convert_in_parallel(const From* in, To* out, int64_t n, void (*convert)(const From*, To*, int64_t)) {
  parallel_for(n, kElementwiseGrain, [in, out, convert](int64_t begin, int64_t end) {
    convert(in + begin, out + begin, end - begin);
  });
}

}  // namespace

void convert_floats(const float* in, graph::bfloat16* out, int64_t n) { convert_in_parallel(in, out, n, to_bfloat16); }
void convert_floats(const float* in, graph::float16* out, int64_t n) { convert_in_parallel(in, out, n, to_float16); }
void convert_floats(const graph::bfloat16* in, float* out, int64_t n) { convert_in_parallel(in, out, n, from_bfloat16); }
void convert_floats(const graph::float16* in, float* out, int64_t n) { convert_in_parallel(in, out, n, from_float16); }

}  // namespace mirra::ops::cpu
