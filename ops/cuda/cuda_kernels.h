// The GPU kernels of the built-in ops (ops/cuda/), registered into the kernel table from this one
// place; a build without the CUDA backend has none. Free of CUDA headers.
#pragma once

#include "runtime/kernel.h"

namespace mirra::ops {

// Adds every GPU kernel to `kernels` (after the CPU kernels, some of which the GPU shares).
void register_cuda_kernels(runtime::KernelRegistry& kernels);

}  // namespace mirra::ops
