// The GPU tests' main: without a usable CUDA device it prints "skipped: no CUDA device" with the
// reason and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE), never as passed; with
// MIRRA_REQUIRE_GPU=1 that is a failure instead. With a device it runs every test case, but those
// that need several GPUs (named "several_gpus") on a machine with one, which it names as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tests/gpu/gpu_test_util.h"

int main(int argc, char** argv) {
  if (const int skip = mirra::test::skip_without_gpu(); skip >= 0) return skip;
  doctest::Context context(argc, argv);
  if (mirra::test::gpu_count() < 2) {
    std::printf("skipped: the test cases named several_gpus (this machine has one GPU)\n");
    context.addFilter("test-case-exclude", "*several_gpus*");
  }
  return context.run();
}
