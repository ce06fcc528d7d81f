// What the cuDNN kernels decide from cuDNN's answers.
// - Whether cuDNN refused a problem (the caller falls back to another way of computing it) or
//   failed: cuDNN 9 reports a refusal with a sub-code of the NOT_SUPPORTED category (_SHAPE, _LAYOUT,
//   _DATA_TYPE, ...), grouped by CUDNN_STATUS_CATEGORY, and rejects some configurations with
//   BAD_PARAM: a refusal too on the first try of a problem, but an error once the call has run for it.
// - Which of the algorithms its heuristics rank to run: the first it can run, and in deterministic
//   mode the first of those that is deterministic (some backward algorithms sum with atomics, in an
//   order that changes from run to run).
#pragma once

#include <cudnn.h>

namespace mirra::ops::cuda {

inline bool cudnn_refused(cudnnStatus_t status, bool ran_before) {
  const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
  return category == CUDNN_STATUS_NOT_SUPPORTED || (!ran_before && category == CUDNN_STATUS_BAD_PARAM);
}

// The index of the first usable of `count` ranked results (cudnnConvolution*AlgoPerf_t), or -1.
template <class Perf>
int first_usable_algorithm(const Perf* results, int count, bool deterministic) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && results[i].determinism != CUDNN_DETERMINISTIC) continue;
    return i;
  }
  return -1;
}

}  // namespace mirra::ops::cuda
