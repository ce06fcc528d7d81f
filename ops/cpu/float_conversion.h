// Conversions between f32 and the 16-bit floats over arrays, in parallel. Their loops are compiled
// for AVX-512, AVX2 and any x86-64, and the CPU picks one at load time: 16 lanes at a time run
// the branch-free roundings of graph/float16.h about twice as fast as 4, and mixed precision converts
// every product's operands each step. The results are the same either way (ties to even, subnormals
// kept, NaN stays NaN).
#pragma once

#include <cstdint>

#include "graph/float16.h"

namespace mirra::ops::cpu {

void convert_floats(const float* in, graph::bfloat16* out, int64_t n);
void convert_floats(const float* in, graph::float16* out, int64_t n);
void convert_floats(const graph::bfloat16* in, float* out, int64_t n);
void convert_floats(const graph::float16* in, float* out, int64_t n);

}  // namespace mirra::ops::cpu
