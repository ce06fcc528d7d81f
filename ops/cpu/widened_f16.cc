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

void round_to_f16(const Tensor& wide, Tensor& output) {
  convert_floats(wide.data<float>(), output.mutable_data<float16>(), output.num_elements());
}

}  // namespace mirra::ops::cpu
