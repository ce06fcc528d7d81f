// The host side of the GPU kernels that needs no device: which cuDNN statuses are refusals that fall
// back to another way of computing (every NOT_SUPPORTED sub-code of cuDNN 9, BAD_PARAM on a first
// try) and which are errors; which ranked algorithm runs, deterministic ones in deterministic mode.
#include <doctest/doctest.h>

#include <initializer_list>

#include "ops/cuda/cudnn_choices.h"

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

TEST_CASE("cuDNN.the_first_usable_algorithm_and_in_deterministic_mode_the_first_deterministic_one") {
  cudnnConvolutionBwdFilterAlgoPerf_t ranked[3] = {};
  ranked[0] = {.algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, .status = CUDNN_STATUS_NOT_SUPPORTED,
               .determinism = CUDNN_DETERMINISTIC};
  ranked[1] = {.algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, .status = CUDNN_STATUS_SUCCESS,
               .determinism = CUDNN_NON_DETERMINISTIC};  // sums with atomics
  ranked[2] = {.algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, .status = CUDNN_STATUS_SUCCESS,
               .determinism = CUDNN_DETERMINISTIC};
  CHECK(first_usable_algorithm(ranked, 3, /*deterministic=*/false) == 1);
  CHECK(first_usable_algorithm(ranked, 3, /*deterministic=*/true) == 2);
  CHECK(first_usable_algorithm(ranked, 2, /*deterministic=*/true) == -1);
  CHECK(first_usable_algorithm(ranked, 0, /*deterministic=*/false) == -1);
}

}  // namespace
}  // namespace mirra::ops::cuda
