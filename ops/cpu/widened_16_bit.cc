// Widening 16-bit operands to f32 and rounding f32 results back, element by element in parallel; and
// asking oneDNN once whether it has bf16 kernels for this CPU.
#include "ops/cpu/widened_16_bit.h"

#include "ops/cpu/dnnl_descriptors.h"
#include "ops/cpu/dnnl_engine.h"
#include "ops/cpu/float_conversion.h"

namespace mirra::ops::cpu {

using graph::bfloat16;
using graph::DType;
using graph::float16;
using runtime::Tensor;

bool has_bf16_kernels() {
  static const bool has = [] {
    using dnnl::memory;
    // The smallest matmul and convolution on bf16 operands: oneDNN builds them where it has kernels.
    const memory::desc a({2, 2}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc c({2, 2}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc image({1, 2, 2, 2}, memory::data_type::bf16, memory::format_tag::nhwc);
    const memory::desc filter({2, 2, 1, 1}, memory::data_type::bf16, memory::format_tag::any);
    try {
      WindowGeometry unit{};  // stride 1, no dilation, no padding
      unit.strides = {1, 1};
      unit.dilations = unit.pad_before = unit.pad_after = {0, 0};
      matmul_pd(a, a, c, dnnl::primitive_attr());
      convolution_forward_pd(dnnl::prop_kind::forward_training, image, filter, nullptr, image, unit,
                             dnnl::primitive_attr());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

bool computed_widened(DType dtype) { return dtype == DType::f16 || (dtype == DType::bf16 && !has_bf16_kernels()); }

Tensor as_f32(const Tensor& tensor, const runtime::Device& device) {
  if (tensor.dtype() != DType::f16 && tensor.dtype() != DType::bf16) return tensor;
  Tensor wide = Tensor::empty(device.allocator(), DType::f32, tensor.shape());
  if (tensor.dtype() == DType::f16) {
    convert_floats(tensor.data<float16>(), wide.mutable_data<float>(), tensor.num_elements());
  } else {
    convert_floats(tensor.data<bfloat16>(), wide.mutable_data<float>(), tensor.num_elements());
  }
  return wide;
}

Tensor widened(const Tensor& tensor, const runtime::Device& device) {
  return computed_widened(tensor.dtype()) ? as_f32(tensor, device) : tensor;
}

void round_into(const Tensor& wide, Tensor& output) {
  if (output.dtype() == DType::f16) {
    convert_floats(wide.data<float>(), output.mutable_data<float16>(), output.num_elements());
  } else {
    convert_floats(wide.data<float>(), output.mutable_data<bfloat16>(), output.num_elements());
  }
}

}  // namespace mirra::ops::cpu
