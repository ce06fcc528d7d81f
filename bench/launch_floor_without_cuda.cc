// The raw launch floor in a build without the CUDA backend: there is no GPU to launch on.
#include "bench/gpu_executor_overhead.h"

namespace mirra::bench {

graph::Expected<double> raw_launch_seconds(int, int) {
  return graph::unavailable("this build of mirra has no CUDA backend (built without the CUDA toolkit, cuDNN and NCCL)");
}

}  // namespace mirra::bench
