// f16 products on the CPU. Debian's oneDNN (2.6) has CPU kernels for bf16 but none for f16, so the
// matrix products and convolutions take f16 operands by widening them to f32 (exact: every f16 is an
// f32) and round an f16 result once at the end. That is what a GPU's f16 tensor cores compute (f16
// operands, f32 accumulation), so f16 training runs, and its loss scaling is tested, on any machine;
// it is not faster than f32 here, and bf16 is the 16-bit type that pays on this CPU.
#pragma once

#include "runtime/device.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

// `tensor` itself unless it is f16; else a new f32 tensor of its values from `device`'s memory.
runtime::Tensor widened_f16(const runtime::Tensor& tensor, const runtime::Device& device);

// Rounds the f32 values of `wide` into the f16 tensor `output` of the same shape.
void round_to_f16(const runtime::Tensor& wide, runtime::Tensor& output);

// Runs `compute` on where a result that `output` holds is written: `output` itself, or for an f16
// output an f32 tensor from `device`'s memory, which is then rounded into it.
template <class Compute>
graph::Status compute_widened(runtime::Tensor& output, const runtime::Device& device, Compute&& compute) {
  if (output.dtype() != graph::DType::f16) return compute(output);
  runtime::Tensor wide = runtime::Tensor::empty(device.allocator(), graph::DType::f32, output.shape());
  MIRRA_RETURN_IF_ERROR(compute(wide));
  round_to_f16(wide, output);
  return graph::Status();
}

}  // namespace mirra::ops::cpu
