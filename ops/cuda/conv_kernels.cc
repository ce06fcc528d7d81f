// Conv2D, FusedConv2D and Conv2D's two backprop ops on the GPU through cuDNN's convolution API (the
// legacy one: deprecated in cuDNN 9, still complete; its warnings are silenced in this file). Data is
// NHWC (or NCHW); cuDNN's filters are KRSC (KCRS for NCHW) where mirra's are HWIO, so the filter is
// permuted into a scratch tensor, and the filter gradient permuted back. The algorithm for each
// problem comes from cuDNN's heuristics once and is cached; FMA math, so no TF32, unless the device
// allows it. FusedConv2D is the convolution followed by the BiasAdd and Relu kernels.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <map>
#include <mutex>

#include "ops/cuda/box_copy.h"
#include "ops/cuda/cudnn_window.h"
#include "ops/kernel_shapes.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

constexpr int64_t kHwioToKrsc[] = {3, 0, 1, 2};  // [h, w, in, out] -> [out, h, w, in]
constexpr int64_t kHwioToKcrs[] = {3, 2, 0, 1};  // -> [out, in, h, w]
constexpr int64_t kKrscToHwio[] = {1, 2, 3, 0};
constexpr int64_t kKcrsToHwio[] = {2, 3, 1, 0};

// A convolution as cuDNN sees it: descriptors of the input, the permuted filter, the output (or dy)
// and the convolution, for the node on concrete shapes.
struct ConvProblem {
  Window window;
  int64_t out_channels = 0;
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  std::string key;  // identifies the problem in the algorithm caches

  Status set(const KernelContext& ctx, const Tensor& input, const Tensor& filter) {
    window = Window::of(ctx, input, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations"));
    if (!window.symmetric) {
      return graph::unimplemented("SAME padding of " + input.type_string() + " is larger after than before, which the GPU's "
                                  "convolutions do not support yet (cuDNN pads symmetrically)");
    }
    out_channels = filter.dim(3);
    const Window& g = window;
    MIRRA_RETURN_IF_ERROR(x.set(g.nchw, g.batch, g.channels, g.height, g.width));
    MIRRA_RETURN_IF_ERROR(y.set(g.nchw, g.batch, out_channels, g.out_height, g.out_width));
    MIRRA_RETURN_IF_ERROR(w.set(g.nchw, out_channels, g.channels, g.window_h, g.window_w));
    const bool tf32 = gpu_of(ctx).allow_tf32();
    MIRRA_RETURN_IF_ERROR(conv.set(g, tf32));
    key = std::to_string(ctx.device().id().ordinal);
    for (int64_t v : {int64_t{tf32}, int64_t{g.nchw}, g.batch, g.channels, g.height, g.width, out_channels, g.window_h, g.window_w, g.stride_h,
                      g.stride_w, g.dilation_h, g.dilation_w, g.pad_h, g.pad_w}) {
      key.append(",").append(std::to_string(v));
    }
    return Status();
  }

  // The filter in cuDNN's order, in a scratch tensor.
  graph::Expected<Tensor> cudnn_filter(const KernelContext& ctx, const Tensor& filter) const {
    const std::span<const int64_t> perm(window.nchw ? kHwioToKcrs : kHwioToKrsc, 4);
    Tensor permuted = Tensor::empty(ctx.device().allocator(), DType::f32, permuted_shape(filter.shape(), perm));
    MIRRA_RETURN_IF_ERROR(copy(ctx, filter, permuted, permutation(filter.shape(), perm)));
    return permuted;
  }
};

// cuDNN's first choice for a problem, found once (per direction) and kept.
template <class Algorithm>
class AlgorithmCache {
 public:
  template <class Find>
  graph::Expected<Algorithm> get(const std::string& key, Find find) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = chosen_.find(key); it != chosen_.end()) return it->second;
    }
    MIRRA_ASSIGN_OR_RETURN(const Algorithm algorithm, find());
    std::lock_guard lock(mutex_);
    chosen_.emplace(key, algorithm);
    return algorithm;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Algorithm> chosen_;
};

// The first algorithm cuDNN's heuristics rank that it can run, from `count` results.
template <class Perf>
graph::Expected<decltype(Perf{}.algo)> first_usable(const Perf* results, int count, const char* what) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS) return results[i].algo;
  }
  return graph::unimplemented(std::string("cuDNN has no ") + what + " algorithm for this convolution");
}

// Scratch memory for cuDNN from the device's allocator (freed in stream order like any tensor).
Tensor workspace(const KernelContext& ctx, size_t bytes) {
  return Tensor::empty(ctx.device().allocator(), DType::f32, TensorShape{static_cast<int64_t>((bytes + 3) / 4)});
}

Status zero(const KernelContext& ctx, Tensor& out) {
  if (out.byte_size() == 0) return Status();
  MIRRA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.mutable_raw_data(), 0, out.byte_size(), stream_of(ctx)));
  return Status();
}

// Conv2D, or FusedConv2D with a bias (input 2) and maybe a ReLU after it.
Status conv2d_forward(KernelContext& ctx, const Tensor* bias, bool relu) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const bool nchw = ctx.attr<std::string>("data_format") == "NCHW";
  MIRRA_RETURN_IF_ERROR(check_conv_operands(ctx, input, filter, bias));
  ConvProblem c;
  const Window window = Window::of(ctx, input, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations"));
  Tensor& output = ctx.allocate_output(0, DType::f32, window.output_shape(filter.dim(3)));
  if (output.num_elements() == 0) return Status();
  if (input.num_elements() == 0 || filter.num_elements() == 0) {
    MIRRA_RETURN_IF_ERROR(zero(ctx, output));  // no input channels: the bias alone
  } else {
    MIRRA_RETURN_IF_ERROR(c.set(ctx, input, filter));
    MIRRA_ASSIGN_OR_RETURN(const Tensor w, c.cudnn_filter(ctx, filter));
    static AlgorithmCache<cudnnConvolutionFwdAlgo_t> algorithms;
    const cudnnHandle_t handle = gpu_of(ctx).cudnn();
    MIRRA_ASSIGN_OR_RETURN(const cudnnConvolutionFwdAlgo_t algorithm, algorithms.get(c.key, [&]() -> graph::Expected<cudnnConvolutionFwdAlgo_t> {
      cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int count = 0;
      MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(handle, c.x.get(), c.w.get(), c.conv.get(), c.y.get(),
                                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, results));
      return first_usable(results, count, "forward");
    }));
    size_t bytes = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(handle, c.x.get(), c.w.get(), c.conv.get(), c.y.get(),
                                                                       algorithm, &bytes));
    Tensor scratch = workspace(ctx, bytes);
    const float one = 1, none = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cudnnConvolutionForward(handle, &one, c.x.get(), input.raw_data(), c.w.get(), w.raw_data(),
                                                       c.conv.get(), algorithm, scratch.mutable_raw_data(), bytes, &none,
                                                       c.y.get(), output.mutable_raw_data()));
  }
  if (bias != nullptr) {
    const int64_t inner = nchw ? window.out_height * window.out_width : 1;
    MIRRA_RETURN_IF_ERROR(launched(bias_add(DType::f32, output.raw_data(), bias->raw_data(), output.mutable_raw_data(),
                                            output.num_elements(), filter.dim(3), inner, stream_of(ctx)),
                                   "bias_add"));
  }
  if (relu) {
    MIRRA_RETURN_IF_ERROR(launched(unary(UnaryOp::relu, DType::f32, output.raw_data(), output.mutable_raw_data(),
                                         output.num_elements(), stream_of(ctx)),
                                   "relu"));
  }
  return Status();
}

Status conv2d_kernel(KernelContext& ctx) { return conv2d_forward(ctx, nullptr, false); }

Status fused_conv2d_kernel(KernelContext& ctx) {
  return conv2d_forward(ctx, &ctx.input(2), ctx.attr<std::string>("activation") == "relu");
}

// d loss / d input of Conv2D: inputs (input, filter, dy); `input` gives the shape.
Status conv2d_backprop_input_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  Tensor& dx = ctx.allocate_output(0, DType::f32, input.shape());
  if (dx.num_elements() == 0 || filter.num_elements() == 0 || dy.num_elements() == 0) return zero(ctx, dx);
  ConvProblem c;
  MIRRA_RETURN_IF_ERROR(c.set(ctx, input, filter));
  MIRRA_ASSIGN_OR_RETURN(const Tensor w, c.cudnn_filter(ctx, filter));
  static AlgorithmCache<cudnnConvolutionBwdDataAlgo_t> algorithms;
  const cudnnHandle_t handle = gpu_of(ctx).cudnn();
  MIRRA_ASSIGN_OR_RETURN(const cudnnConvolutionBwdDataAlgo_t algorithm, algorithms.get(c.key, [&]() -> graph::Expected<cudnnConvolutionBwdDataAlgo_t> {
    cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, c.w.get(), c.y.get(), c.conv.get(), c.x.get(),
                                                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, results));
    return first_usable(results, count, "backward data");
  }));
  size_t bytes = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, c.w.get(), c.y.get(), c.conv.get(), c.x.get(),
                                                                          algorithm, &bytes));
  Tensor scratch = workspace(ctx, bytes);
  const float one = 1, none = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnConvolutionBackwardData(handle, &one, c.w.get(), w.raw_data(), c.y.get(), dy.raw_data(),
                                                          c.conv.get(), algorithm, scratch.mutable_raw_data(), bytes, &none,
                                                          c.x.get(), dx.mutable_raw_data()));
  return Status();
}

// d loss / d filter of Conv2D: inputs (input, filter, dy); `filter` gives the shape.
Status conv2d_backprop_filter_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor& dy = ctx.input(2);
  Tensor& dw = ctx.allocate_output(0, DType::f32, filter.shape());
  if (dw.num_elements() == 0 || input.num_elements() == 0 || dy.num_elements() == 0) return zero(ctx, dw);
  ConvProblem c;
  MIRRA_RETURN_IF_ERROR(c.set(ctx, input, filter));
  static AlgorithmCache<cudnnConvolutionBwdFilterAlgo_t> algorithms;
  const cudnnHandle_t handle = gpu_of(ctx).cudnn();
  MIRRA_ASSIGN_OR_RETURN(const cudnnConvolutionBwdFilterAlgo_t algorithm, algorithms.get(c.key, [&]() -> graph::Expected<cudnnConvolutionBwdFilterAlgo_t> {
    cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, c.x.get(), c.y.get(), c.conv.get(), c.w.get(),
                                                                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, results));
    return first_usable(results, count, "backward filter");
  }));
  size_t bytes = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, c.x.get(), c.y.get(), c.conv.get(), c.w.get(),
                                                                            algorithm, &bytes));
  Tensor scratch = workspace(ctx, bytes);
  const std::span<const int64_t> to_cudnn(c.window.nchw ? kHwioToKcrs : kHwioToKrsc, 4);
  Tensor gradient = Tensor::empty(ctx.device().allocator(), DType::f32, permuted_shape(filter.shape(), to_cudnn));
  const float one = 1, none = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(handle, &one, c.x.get(), input.raw_data(), c.y.get(), dy.raw_data(),
                                                            c.conv.get(), algorithm, scratch.mutable_raw_data(), bytes, &none,
                                                            c.w.get(), gradient.mutable_raw_data()));
  const std::span<const int64_t> back(c.window.nchw ? kKcrsToHwio : kKrscToHwio, 4);
  return copy(ctx, gradient, dw, permutation(gradient.shape(), back));
}

}  // namespace

void register_gpu_conv_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t f32 = runtime::dtype_mask({DType::f32});
  kernels.add("Conv2D", DeviceKind::gpu, {.fn = conv2d_kernel, .expensive = true, .dtypes = f32});
  kernels.add("FusedConv2D", DeviceKind::gpu, {.fn = fused_conv2d_kernel, .expensive = true, .dtypes = f32});
  kernels.add("Conv2DBackpropInput", DeviceKind::gpu, {.fn = conv2d_backprop_input_kernel, .expensive = true, .dtypes = f32});
  kernels.add("Conv2DBackpropFilter", DeviceKind::gpu, {.fn = conv2d_backprop_filter_kernel, .expensive = true, .dtypes = f32});
}

}  // namespace mirra::ops::cuda
