// The GPU tests' main: without a usable CUDA device it prints "skipped: no CUDA device" with the
// reason and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE), never as passed; with
// MIRRA_REQUIRE_GPU=1 that is a failure instead. With a device it runs every test case.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/gpu/gpu_test_util.h"

int main(int argc, char** argv) {
  if (const int skip = mirra::test::skip_without_gpu(); skip >= 0) return skip;
  doctest::Context context(argc, argv);
  return context.run();
}
