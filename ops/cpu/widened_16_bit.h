// 16-bit products without 16-bit kernels. Debian's oneDNN (2.6) has CPU kernels for bf16 on CPUs
// with AVX-512 (AMX and AVX-512 BF16 where present) and none for f16 on any CPU, so the matrix
// products and convolutions take 16-bit operands that oneDNN cannot multiply here by widening them to
// f32 (exact: every f16 and bf16 is an f32) and round a 16-bit result once at the end. That is what
// 16-bit tensor cores compute (16-bit operands, f32 accumulation), so mixed-precision training runs,
// and its loss scaling is tested, on any machine; it is not faster than f32 there.
#pragma once

#include "runtime/device.h"
#include "runtime/tensor.h"

namespace mirra::ops::cpu {

// True when oneDNN multiplies bf16 on this CPU (asked once, by building a bf16 product's primitive).
bool has_bf16_kernels();

// True when products on `dtype` operands are computed in f32 here: f16, and bf16 without bf16 kernels.
bool computed_widened(graph::DType dtype);

// `tensor` itself unless it is f16 or bf16; else a new f32 tensor of its values from `device`'s memory.
runtime::Tensor as_f32(const runtime::Tensor& tensor, const runtime::Device& device);

// `tensor` itself unless computed_widened(its dtype); else as_f32(tensor).
runtime::Tensor widened(const runtime::Tensor& tensor, const runtime::Device& device);

// Rounds the f32 values of `wide` into the 16-bit tensor `output` of the same shape.
void round_into(const runtime::Tensor& wide, runtime::Tensor& output);

// Runs `compute` on where a result that `output` holds is written: `output` itself, or for a result
// computed widened an f32 tensor from `device`'s memory, which is then rounded into it.
template <class Compute>
graph::Status compute_widened(runtime::Tensor& output, const runtime::Device& device, Compute&& compute) {
  if (!computed_widened(output.dtype())) return compute(output);
  runtime::Tensor wide = runtime::Tensor::empty(device.allocator(), graph::DType::f32, output.shape());
  MIRRA_RETURN_IF_ERROR(compute(wide));
  round_into(wide, output);
  return graph::Status();
}

}  // namespace mirra::ops::cpu
