// MIRRA_VECTOR_CLONES: a function compiled for AVX-512, for AVX2 and for any x86-64, of which the CPU
// picks one at load time (target_clones); elsewhere a plain function. For the loops the compiler
// vectorises, so that one build runs each machine's widest vectors. Put it on overloads, not
// templates: clang cannot clone templates.
#pragma once

#if defined(__x86_64__)
#define MIRRA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MIRRA_VECTOR_CLONES
#endif
