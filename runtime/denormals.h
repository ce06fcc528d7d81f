// Subnormal floats flushed to zero on the threads that run a session's kernels, as TensorFlow's CPU
// threads do. x86 cores take a slow microcode path for every operation on a subnormal (tens of times
// slower): training with Adam drifts into them (second moments of tiny gradients), and a CNN epoch
// ran at half speed from its second epoch on. With FTZ (results) and DAZ (inputs) set in MXCSR they
// become zero instead; nothing a model computes depends on values below 2^-126.
//
// oneTBB runs every task with the floating-point mode its arena captured when it was initialised, so
// a session's arena made here carries the mode to all its tasks, whichever thread runs them; OpenMP
// threads that oneDNN starts from them inherit it. SessionOptions::flush_denormals (default on) asks
// for it; without it, IEEE gradual underflow.
#pragma once

#include <oneapi/tbb/task_arena.h>

#include <memory>

namespace mirra::runtime {

// An initialised arena of `threads` threads whose tasks flush subnormals when `flush_denormals`.
std::unique_ptr<oneapi::tbb::task_arena> make_task_arena(int threads, bool flush_denormals);

}  // namespace mirra::runtime
