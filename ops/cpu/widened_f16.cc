// Widening f16 operands to f32 and rounding f32 results to f16, element by element in parallel.
#include "ops/cpu/widened_f16.h"

#include "ops/cpu/float_conversion.h"

namespace mirra::ops::cpu {

using graph::DType;
using graph::float16;
using runtime::Tensor;

Tensor widened_f16(const Tensor& tensor, const runtime::Device& device) {
  if (tensor.dtype() != DType::f16) return tensor;
  Tensor wide = Tensor::empty(device.allocator(), DType::f32, tensor.shape());
  convert_floats(tensor.data<float16>(), wide.mutable_data<float>(), tensor.num_elements());
  return wide;
}

F16Staging::F16Staging(Tensor& output, const runtime::Device& device) : output_(output) {
  if (output.dtype() == DType::f16) staged_ = Tensor::empty(device.allocator(), DType::f32, output.shape());
}

void F16Staging::finish() {
  if (!staged_.defined()) return;
  convert_floats(staged_.data<float>(), output_.mutable_data<float16>(), output_.num_elements());
}

}  // namespace mirra::ops::cpu
