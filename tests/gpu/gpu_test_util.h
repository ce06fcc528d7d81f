// What GPU tests share: the skip rule (no CUDA device: skipped, exit 77, unless MIRRA_REQUIRE_GPU=1
// makes it a failure) for every binary that needs a GPU.
#pragma once

namespace mirra::test {

inline constexpr int kSkipExitCode = 77;

// -1 when a CUDA device is there; otherwise prints why not and returns the exit code to end with:
// kSkipExitCode, or 1 under MIRRA_REQUIRE_GPU=1.
int skip_without_gpu();
// The CUDA devices of this machine (0 without any).
int gpu_count();

}  // namespace mirra::test
