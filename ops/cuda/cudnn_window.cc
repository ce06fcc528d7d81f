// Window geometry, and cuDNN's descriptors.
#include "ops/cuda/cudnn_window.h"

#include "graph/check.h"
#include "ops/shape_inference.h"

namespace mirra::ops::cuda {

Window Window::of(const KernelContext& ctx, const Tensor& input, int64_t window_h, int64_t window_w,
                                   const std::vector<int64_t>& dilations) {
  Window w;
  w.nchw = ctx.attr<std::string>("data_format") == "NCHW";
  w.batch = input.dim(0);
  w.channels = input.dim(w.nchw ? 1 : 3);
  w.height = input.dim(w.nchw ? 2 : 1);
  w.width = input.dim(w.nchw ? 3 : 2);
  w.window_h = window_h;
  w.window_w = window_w;
  const auto& strides = ctx.attr<std::vector<int64_t>>("strides");
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  w.dilation_h = dilations[0];
  w.dilation_w = dilations[1];
  const WindowPadding padding = WindowPadding::of(ctx.node().attrs);
  w.out_height = padding.output_dim(0, w.height, window_h, w.stride_h, w.dilation_h);
  w.out_width = padding.output_dim(1, w.width, window_w, w.stride_w, w.dilation_w);
  if (!padding.same && !padding.is_explicit) return w;
  w.pad_h = padding.before(0, w.height, w.out_height, window_h, w.stride_h, w.dilation_h);
  w.pad_w = padding.before(1, w.width, w.out_width, window_w, w.stride_w, w.dilation_w);
  w.pad_after_h = std::max<int64_t>((w.out_height - 1) * w.stride_h + (window_h - 1) * w.dilation_h + 1 - w.height - w.pad_h, 0);
  w.pad_after_w = std::max<int64_t>((w.out_width - 1) * w.stride_w + (window_w - 1) * w.dilation_w + 1 - w.width - w.pad_w, 0);
  return w;
}

TensorShape Window::output_shape(int64_t out_channels) const {
  return nchw ? TensorShape{batch, out_channels, out_height, out_width} : TensorShape{batch, out_height, out_width, out_channels};
}

namespace {

// cuDNN takes int dims.
int narrow(int64_t value) { return static_cast<int>(value); }

}  // namespace

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f16: return CUDNN_DATA_HALF;
    default: break;  // the kernels' dtype lists keep the others on the CPU
  }
  MIRRA_CHECK(false, "a GPU kernel gave cuDNN a dtype its dtype list refuses: " + std::string(graph::dtype_name(dtype)));
  return CUDNN_DATA_FLOAT;
}

TensorDescriptor::TensorDescriptor() { MIRRA_CUDA_THROW_IF_ERROR(cudnnCreateTensorDescriptor(&descriptor_)); }
TensorDescriptor::~TensorDescriptor() { (void)cudnnDestroyTensorDescriptor(descriptor_); }
Status TensorDescriptor::set(bool nchw, DType dtype, int64_t n, int64_t c, int64_t h, int64_t w) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(descriptor_, nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC,
                                                        cudnn_type(dtype), narrow(n), narrow(c), narrow(h), narrow(w)));
  return Status();
}

FilterDescriptor::FilterDescriptor() { MIRRA_CUDA_THROW_IF_ERROR(cudnnCreateFilterDescriptor(&descriptor_)); }
FilterDescriptor::~FilterDescriptor() { (void)cudnnDestroyFilterDescriptor(descriptor_); }
Status FilterDescriptor::set(bool nchw, DType dtype, int64_t out_channels, int64_t in_channels, int64_t h, int64_t w) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(descriptor_, cudnn_type(dtype), nchw ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC,
                                                        narrow(out_channels), narrow(in_channels), narrow(h), narrow(w)));
  return Status();
}

ConvolutionDescriptor::ConvolutionDescriptor() { MIRRA_CUDA_THROW_IF_ERROR(cudnnCreateConvolutionDescriptor(&descriptor_)); }
ConvolutionDescriptor::~ConvolutionDescriptor() { (void)cudnnDestroyConvolutionDescriptor(descriptor_); }
Status ConvolutionDescriptor::set(const Window& w, DType dtype, bool allow_tf32) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(descriptor_, narrow(w.pad_h), narrow(w.pad_w), narrow(w.stride_h),
                                                             narrow(w.stride_w), narrow(w.dilation_h), narrow(w.dilation_w),
                                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  const cudnnMathType_t math = dtype != DType::f32 ? CUDNN_TENSOR_OP_MATH : allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnSetConvolutionMathType(descriptor_, math));
  return Status();
}

ActivationDescriptor::ActivationDescriptor() { MIRRA_CUDA_THROW_IF_ERROR(cudnnCreateActivationDescriptor(&descriptor_)); }
ActivationDescriptor::~ActivationDescriptor() { (void)cudnnDestroyActivationDescriptor(descriptor_); }
Status ActivationDescriptor::set(bool relu) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnSetActivationDescriptor(descriptor_, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                          CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return Status();
}

PoolingDescriptor::PoolingDescriptor() { MIRRA_CUDA_THROW_IF_ERROR(cudnnCreatePoolingDescriptor(&descriptor_)); }
PoolingDescriptor::~PoolingDescriptor() { (void)cudnnDestroyPoolingDescriptor(descriptor_); }
Status PoolingDescriptor::set(cudnnPoolingMode_t mode, const Window& w) {
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnSetPooling2dDescriptor(descriptor_, mode, CUDNN_NOT_PROPAGATE_NAN, narrow(w.window_h),
                                                         narrow(w.window_w), narrow(w.pad_h), narrow(w.pad_w),
                                                         narrow(w.stride_h), narrow(w.stride_w)));
  return Status();
}

}  // namespace mirra::ops::cuda
