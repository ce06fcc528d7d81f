// The skip rule of the GPU tests.
#include "tests/gpu/gpu_test_util.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "runtime/gpu_devices.h"

namespace mirra::test {

int skip_without_gpu() {
  const auto gpus = runtime::list_gpus();
  if (gpus.ok()) return -1;
  const char* require = std::getenv("MIRRA_REQUIRE_GPU");
  if (require != nullptr && std::string_view(require) == "1") {
    std::fprintf(stderr, "failed: no CUDA device, and MIRRA_REQUIRE_GPU=1 requires one (%s)\n", gpus.status().message().c_str());
    return 1;
  }
  std::printf("skipped: no CUDA device (%s)\n", gpus.status().message().c_str());
  return kSkipExitCode;
}

int gpu_count() {
  const auto gpus = runtime::list_gpus();
  return gpus.ok() ? static_cast<int>(gpus->size()) : 0;
}

}  // namespace mirra::test
