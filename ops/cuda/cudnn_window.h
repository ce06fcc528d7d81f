// What the GPU's convolution and pooling kernels share: the window geometry of a node on a concrete
// input (TensorFlow's SAME/VALID rules, as the CPU kernels compute them), and cuDNN's descriptors as
// RAII objects with checked setters (the convolutions use them), for f32, bf16 or f16 data.
#pragma once

#include <cudnn.h>

#include <string>
#include <vector>

#include "ops/cuda/gpu_kernel.h"

namespace mirra::ops::cuda {

struct Window {
  bool nchw = false;
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t window_h = 0, window_w = 0;
  int64_t out_height = 0, out_width = 0;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_h = 0, pad_w = 0;              // before
  int64_t pad_after_h = 0, pad_after_w = 0;  // TensorFlow's SAME may put one more after than before

  // Whether the padding after equals the padding before (cuDNN pads symmetrically).
  bool symmetric() const { return pad_after_h == pad_h && pad_after_w == pad_w; }

  // The node's window (its strides, padding and data_format attributes) over `input`.
  static Window of(const KernelContext& ctx, const Tensor& input, int64_t window_h, int64_t window_w,
                   const std::vector<int64_t>& dilations);
  TensorShape output_shape(int64_t out_channels) const;
};

// cuDNN's name for f32, bf16 or f16.
cudnnDataType_t cudnn_type(DType dtype);

// A 4-D tensor descriptor of `dtype` in the window's layout.
class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  Status set(bool nchw, DType dtype, int64_t n, int64_t c, int64_t h, int64_t w);
  cudnnTensorDescriptor_t get() const { return descriptor_; }

 private:
  cudnnTensorDescriptor_t descriptor_ = nullptr;
};

// A filter descriptor of `dtype` in KRSC (NHWC data) or KCRS (NCHW data) order.
class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  Status set(bool nchw, DType dtype, int64_t out_channels, int64_t in_channels, int64_t h, int64_t w);
  cudnnFilterDescriptor_t get() const { return descriptor_; }

 private:
  cudnnFilterDescriptor_t descriptor_ = nullptr;
};

// A cross-correlation (what TensorFlow calls convolution) of `dtype` data, summed in f32: for f32
// data FMA math (no TF32) unless TF32 is allowed; bf16 and f16 data on the tensor cores.
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  Status set(const Window& window, DType dtype, bool allow_tf32);
  cudnnConvolutionDescriptor_t get() const { return descriptor_; }

 private:
  cudnnConvolutionDescriptor_t descriptor_ = nullptr;
};

// ReLU (NaN becomes zero, as the CPU's Relu) or the identity, for the fused convolution.
class ActivationDescriptor {
 public:
  ActivationDescriptor();
  ~ActivationDescriptor();
  ActivationDescriptor(const ActivationDescriptor&) = delete;
  ActivationDescriptor& operator=(const ActivationDescriptor&) = delete;
  Status set(bool relu);
  cudnnActivationDescriptor_t get() const { return descriptor_; }

 private:
  cudnnActivationDescriptor_t descriptor_ = nullptr;
};

class PoolingDescriptor {
 public:
  PoolingDescriptor();
  ~PoolingDescriptor();
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  Status set(cudnnPoolingMode_t mode, const Window& window);
  cudnnPoolingDescriptor_t get() const { return descriptor_; }

 private:
  cudnnPoolingDescriptor_t descriptor_ = nullptr;
};

}  // namespace mirra::ops::cuda
