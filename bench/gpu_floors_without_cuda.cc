// The GPU floors in a build without the CUDA backend: there is no GPU to measure.
#include "bench/gpu_floors.h"

namespace mirra::bench {

namespace {
const char* const kNoBackend = "this build of mirra has no CUDA backend (built without the CUDA toolkit, cuDNN and NCCL)";
}

graph::Expected<double> raw_launch_seconds(int, int) { return graph::unavailable(kNoBackend); }

graph::Expected<double> mlp_gemm_seconds_per_step(int64_t, int) { return graph::unavailable(kNoBackend); }

graph::Expected<double> device_copy_gbps(int64_t, int) { return graph::unavailable(kNoBackend); }

}  // namespace mirra::bench
