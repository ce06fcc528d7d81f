// The host side of the GPU kernels that needs no device: which cuDNN statuses are refusals that fall
// back to another way of computing (every NOT_SUPPORTED sub-code of cuDNN 9, BAD_PARAM on a first
// try) and which are errors.
#include <doctest/doctest.h>

#include <initializer_list>

#include "ops/cuda/cudnn_refusal.h"

namespace mirra::ops::cuda {
namespace {

TEST_CASE("cuDNN.refusals_are_the_not_supported_category_and_a_first_bad_param") {
  for (const cudnnStatus_t status : {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
                                     CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, CUDNN_STATUS_NOT_SUPPORTED_LAYOUT}) {
    CAPTURE(static_cast<int>(status));
    CHECK(cudnn_refused(status, /*ran_before=*/false));
    CHECK(cudnn_refused(status, /*ran_before=*/true));
  }
  CHECK(cudnn_refused(CUDNN_STATUS_BAD_PARAM, /*ran_before=*/false));
  CHECK_FALSE(cudnn_refused(CUDNN_STATUS_BAD_PARAM, /*ran_before=*/true));
  for (const cudnnStatus_t status : {CUDNN_STATUS_SUCCESS, CUDNN_STATUS_INTERNAL_ERROR, CUDNN_STATUS_EXECUTION_FAILED,
                                     CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, CUDNN_STATUS_NOT_INITIALIZED}) {
    CAPTURE(static_cast<int>(status));
    CHECK_FALSE(cudnn_refused(status, /*ran_before=*/false));
  }
}

}  // namespace
}  // namespace mirra::ops::cuda
