// Whether cuDNN refused a problem (the caller falls back to another way of computing it) or failed.
// cuDNN 9 reports a refusal with a sub-code of the NOT_SUPPORTED category (_SHAPE, _LAYOUT,
// _DATA_TYPE, ...), grouped by CUDNN_STATUS_CATEGORY, and some configurations it rejects with
// BAD_PARAM: that is a refusal too on the first try of a problem, but an error once the same call
// has run for it.
#pragma once

#include <cudnn.h>

namespace mirra::ops::cuda {

inline bool cudnn_refused(cudnnStatus_t status, bool ran_before) {
  const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
  return category == CUDNN_STATUS_NOT_SUPPORTED || (!ran_before && category == CUDNN_STATUS_BAD_PARAM);
}

}  // namespace mirra::ops::cuda
