// Element-wise functions of f32 tensors through oneDNN's eltwise primitives, which oneDNN compiles for
// the machine's vector instructions (GELU's erf and tanh, exponentials): the tensor as a flat vector,
// the primitive cached in the node's state (the kernel's `prepare` is prepare_dnnl_kernel).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

#include "graph/status.h"
#include "runtime/kernel.h"

namespace mirra::ops::cpu {

// y = f(x) over n floats.
graph::Status dnnl_eltwise(runtime::KernelContext& ctx, dnnl::algorithm algorithm, const float* x, float* y, int64_t n);
// dx = dy * f'(x) over n floats.
graph::Status dnnl_eltwise_gradient(runtime::KernelContext& ctx, dnnl::algorithm algorithm, const float* dy, const float* x,
                                    float* dx, int64_t n);

}  // namespace mirra::ops::cpu
