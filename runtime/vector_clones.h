// MIRRA_VECTOR_CLONES: a function compiled for AVX-512, for AVX2 and for any x86-64, of which the CPU
// picks one at load time (target_clones); elsewhere a plain function. For the loops the compiler
// vectorises, so that one build runs each machine's widest vectors. Put it on overloads, not
// templates: clang cannot clone templates. Not under ThreadSanitizer, whose instrumented resolvers
// would run before its runtime is up.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MIRRA_THREAD_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define MIRRA_THREAD_SANITIZER 1
#endif

#if defined(__x86_64__) && !defined(MIRRA_THREAD_SANITIZER)
#define MIRRA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MIRRA_VECTOR_CLONES
#endif
