// Conv2D, FusedConv2D and Conv2D's two backprop ops on the GPU through cuDNN's convolution API (the
// legacy one: deprecated in cuDNN 9, still complete; its warnings are silenced in this file). Data is
// NHWC (or NCHW); cuDNN's filters are KRSC (KCRS for NCHW) where mirra's are HWIO, so the filter is
// permuted into a scratch tensor, and the filter gradient permuted back.
//
// Each problem (dtype, shapes, geometry, TF32) of a node gets a ConvPlan once, kept by the node's
// kernel state (its last kPlansPerNode problems): its descriptors and, found on first use, the
// algorithm of each direction from cuDNN's heuristics.
// f32 runs FMA math, so no TF32, unless the device allows it. SAME padding larger after than before
// (cuDNN pads symmetrically) pads the input explicitly and convolves without padding, as TensorFlow
// does; the input gradient is then computed for the padded input and its interior kept. FusedConv2D
// on f32 runs cuDNN's fused convolution + bias + activation where cuDNN supports the problem, and the
// convolution followed by the BiasAdd and Relu kernels where it does not.
//
// bf16 and f16 operands are convolved in their own type on the tensor cores, summed in f32 and
// written in that type (cuDNN's 16-bit convolutions write 16-bit results, as TensorFlow's and
// PyTorch's mixed precision keep them). So on the GPU a convolution's f32_output is its 16-bit result
// widened, one rounding from the CPU's f32 sums; a FusedConv2D adds its bias and applies its ReLU in
// f32 after.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <array>
#include <memory>
#include <mutex>
#include <optional>

#include "ops/cuda/box_copy.h"
#include "ops/cuda/cudnn_choices.h"
#include "ops/cuda/cudnn_window.h"
#include "ops/kernel_shapes.h"
#include "runtime/bounded_cache.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

constexpr int64_t kHwioToKrsc[] = {3, 0, 1, 2};  // [h, w, in, out] -> [out, h, w, in]
constexpr int64_t kHwioToKcrs[] = {3, 2, 0, 1};  // -> [out, in, h, w]
constexpr int64_t kKrscToHwio[] = {1, 2, 3, 0};
constexpr int64_t kKcrsToHwio[] = {2, 3, 1, 0};

// cuDNN's fused forward runs ReLU only with this algorithm.
constexpr cudnnConvolutionFwdAlgo_t kFusedAlgorithm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;

// The first algorithm cuDNN's heuristics rank that it can run (and, `deterministic`, that is
// deterministic), from `count` results.
template <class Perf>
graph::Expected<decltype(Perf{}.algo)> first_usable(const Perf* results, int count, const char* what, DType data,
                                                    bool deterministic) {
  if (const int i = first_usable_algorithm(results, count, deterministic); i >= 0) return results[i].algo;
  std::string message = std::string("cuDNN has no ") + (deterministic ? "deterministic " : "") + what +
                        " algorithm for this " + std::string(graph::dtype_name(data)) + " convolution";
  if (data != DType::f32) {
    message += " (16-bit convolutions run on the tensor cores: f16 from compute capability 7.0, bf16 from 8.0)";
  }
  return graph::unimplemented(message);
}

// One convolution problem as cuDNN runs it.
class ConvPlan {
 public:
  // Descriptors for `window` (over an input explicitly padded first where the padding is asymmetric)
  // and a filter of `out_channels`.
  // Deterministic: only algorithms that give the same bits every run.
  ConvPlan(const Window& window, int64_t out_channels, DType data, bool allow_tf32, bool deterministic)
      : window_(window), data_(data), deterministic_(deterministic), pad_explicitly_(!window.symmetric()) {
    Window& g = cudnn_window_;
    g = window;
    if (pad_explicitly_) {
      g.height += window.pad_h + window.pad_after_h;
      g.width += window.pad_w + window.pad_after_w;
      g.pad_h = g.pad_w = g.pad_after_h = g.pad_after_w = 0;
      padded_shape_ = g.nchw ? TensorShape{g.batch, g.channels, g.height, g.width} : TensorShape{g.batch, g.height, g.width, g.channels};
      origin_[g.nchw ? 2 : 1] = window.pad_h;
      origin_[g.nchw ? 3 : 2] = window.pad_w;
    }
    status_ = x_.set(g.nchw, data, g.batch, g.channels, g.height, g.width);
    if (status_.ok()) status_ = y_.set(g.nchw, data, g.batch, out_channels, g.out_height, g.out_width);
    if (status_.ok()) status_ = w_.set(g.nchw, data, out_channels, g.channels, g.window_h, g.window_w);
    if (status_.ok()) status_ = bias_.set(/*nchw=*/true, data, 1, out_channels, 1, 1);
    if (status_.ok()) status_ = conv_.set(g, data, allow_tf32);
  }

  const Status& status() const { return status_; }
  bool nchw() const { return window_.nchw; }
  DType data() const { return data_; }

  // The input as cuDNN reads it: `input` itself, or a zero-padded copy.
  graph::Expected<Tensor> cudnn_input(const KernelContext& ctx, const Tensor& input) const {
    if (!pad_explicitly_) return input;
    Tensor padded = Tensor::empty(ctx.device().allocator(), data_, padded_shape_);
    MIRRA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(padded.mutable_raw_data(), 0, padded.byte_size(), stream_of(ctx)));
    const int64_t zero_origin[kMaxRank] = {};
    MIRRA_RETURN_IF_ERROR(copy(ctx, input, padded, box_between(input.shape(), zero_origin, padded_shape_, origin_, input.shape())));
    return padded;
  }
  // Where cuDNN writes the input's gradient: `dx` itself, or a padded scratch tensor.
  Tensor input_gradient_target(const KernelContext& ctx, Tensor& dx) const {
    return pad_explicitly_ ? Tensor::empty(ctx.device().allocator(), data_, padded_shape_) : dx;
  }
  // The interior of a padded input gradient, into dx (nothing when cuDNN wrote dx itself).
  Status keep_interior(const KernelContext& ctx, const Tensor& padded, Tensor& dx) const {
    if (!pad_explicitly_) return Status();
    const int64_t zero_origin[kMaxRank] = {};
    return copy(ctx, padded, dx, box_between(padded_shape_, origin_, dx.shape(), zero_origin, dx.shape()));
  }

  // The filter in cuDNN's order, in a scratch tensor.
  graph::Expected<Tensor> cudnn_filter(const KernelContext& ctx, const Tensor& filter) const {
    const std::span<const int64_t> perm(nchw() ? kHwioToKcrs : kHwioToKrsc, 4);
    Tensor permuted = Tensor::empty(ctx.device().allocator(), data_, permuted_shape(filter.shape(), perm));
    MIRRA_RETURN_IF_ERROR(copy(ctx, filter, permuted, permutation(filter.shape(), perm)));
    return permuted;
  }

  graph::Expected<cudnnConvolutionFwdAlgo_t> forward_algorithm(cudnnHandle_t handle) {
    return found(forward_, [&]() -> graph::Expected<cudnnConvolutionFwdAlgo_t> {
      cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int count = 0;
      MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_.get(), w_.get(), conv_.get(), y_.get(),
                                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, results));
      return first_usable(results, count, "forward", data_, deterministic_);
    });
  }
  graph::Expected<cudnnConvolutionBwdDataAlgo_t> backward_data_algorithm(cudnnHandle_t handle) {
    return found(backward_data_, [&]() -> graph::Expected<cudnnConvolutionBwdDataAlgo_t> {
      cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int count = 0;
      MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_.get(), y_.get(), conv_.get(), x_.get(),
                                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, results));
      return first_usable(results, count, "backward data", data_, deterministic_);
    });
  }
  graph::Expected<cudnnConvolutionBwdFilterAlgo_t> backward_filter_algorithm(cudnnHandle_t handle) {
    return found(backward_filter_, [&]() -> graph::Expected<cudnnConvolutionBwdFilterAlgo_t> {
      cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int count = 0;
      MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          handle, x_.get(), y_.get(), conv_.get(), w_.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, results));
      return first_usable(results, count, "backward filter", data_, deterministic_);
    });
  }

  // Whether cuDNN's fused forward with this activation was refused for the problem (then the
  // kernel runs the convolution, BiasAdd and Relu apart), or has run for it.
  bool fused_refused(bool relu) const {
    std::lock_guard lock(mutex_);
    return fused_[relu] == Fused::refused;
  }
  bool fused_ran(bool relu) const {
    std::lock_guard lock(mutex_);
    return fused_[relu] == Fused::ran;
  }
  void set_fused(bool relu, bool ran) {
    std::lock_guard lock(mutex_);
    fused_[relu] = ran ? Fused::ran : Fused::refused;
  }

  const TensorDescriptor& x() const { return x_; }
  const TensorDescriptor& y() const { return y_; }
  const TensorDescriptor& bias() const { return bias_; }
  const FilterDescriptor& w() const { return w_; }
  const ConvolutionDescriptor& conv() const { return conv_; }

 private:
  template <class Algorithm, class Find>
  graph::Expected<Algorithm> found(std::optional<Algorithm>& slot, Find find) {
    {
      std::lock_guard lock(mutex_);
      if (slot) return *slot;
    }
    MIRRA_ASSIGN_OR_RETURN(const Algorithm algorithm, find());
    std::lock_guard lock(mutex_);
    slot = algorithm;
    return algorithm;
  }

  Window window_, cudnn_window_;
  DType data_;
  bool deterministic_;
  bool pad_explicitly_;
  TensorShape padded_shape_;
  int64_t origin_[kMaxRank] = {};
  TensorDescriptor x_, y_, bias_;
  FilterDescriptor w_;
  ConvolutionDescriptor conv_;
  Status status_;
  mutable std::mutex mutex_;
  std::optional<cudnnConvolutionFwdAlgo_t> forward_;
  std::optional<cudnnConvolutionBwdDataAlgo_t> backward_data_;
  std::optional<cudnnConvolutionBwdFilterAlgo_t> backward_filter_;
  enum class Fused : uint8_t { untried, ran, refused };
  Fused fused_[2] = {Fused::untried, Fused::untried};
};

// What a convolution kernel keeps for its node: the plans of the problems it saw last.
constexpr size_t kPlansPerNode = 8;
struct ConvKernelState : runtime::KernelState {
  runtime::BoundedCache<std::array<int64_t, 19>, ConvPlan> plans{kPlansPerNode};
};

graph::Expected<std::unique_ptr<runtime::KernelState>> prepare_conv_kernel(const graph::Node& /*node*/,
                                                                         const runtime::Device& /*device*/) {
  return std::unique_ptr<runtime::KernelState>(std::make_unique<ConvKernelState>());
}

// The plan of the node's problem on `input` and `filter` in `data`, made on first sight and kept.
graph::Expected<std::shared_ptr<ConvPlan>> plan_for(const KernelContext& ctx, const Tensor& input, const Tensor& filter,
                                                    DType data) {
  const Window g = Window::of(ctx, input, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations"));
  const bool tf32 = gpu_of(ctx).allow_tf32();
  const std::array<int64_t, 19> key = {ctx.device().id().ordinal, static_cast<int64_t>(data), tf32, g.nchw, g.batch,
                                       g.channels, g.height, g.width, filter.dim(3), g.window_h, g.window_w, g.stride_h,
                                       g.stride_w, g.dilation_h, g.dilation_w, g.pad_h, g.pad_w, g.pad_after_h, g.pad_after_w};
  runtime::BoundedCache<std::array<int64_t, 19>, ConvPlan>& plans = ctx.state<ConvKernelState>().plans;
  if (std::shared_ptr<ConvPlan> plan = plans.find(key)) return plan;
  auto made = std::make_shared<ConvPlan>(g, filter.dim(3), data, tf32, gpu_of(ctx).deterministic());
  MIRRA_RETURN_IF_ERROR(made->status());
  return plans.insert(key, std::move(made));
}

// Scratch memory for cuDNN from the device's allocator (freed in stream order like any tensor).
Tensor workspace(const KernelContext& ctx, size_t bytes) {
  return Tensor::empty(ctx.device().allocator(), DType::f32, TensorShape{static_cast<int64_t>((bytes + 3) / 4)});
}

// `from` converted into `to` (same shape) on the node's stream: widened exactly, or rounded.
Status cast_into(const KernelContext& ctx, const Tensor& from, Tensor& to) {
  return launched(cast(from.dtype(), to.dtype(), from.raw_data(), to.mutable_raw_data(), from.num_elements(), stream_of(ctx)),
                  "cast");
}

// The node's result, allocated: f32 with f32_output or f32 operands, else the operands' 16-bit type.
Tensor& allocate_result(KernelContext& ctx, const TensorShape& shape) {
  return ctx.allocate_output(0, ctx.attr<bool>("f32_output") ? DType::f32 : ctx.input(0).dtype(), shape);
}

// A scratch tensor of `dtype` shaped like `like`, or `like` itself when it has that dtype.
Tensor in_dtype(const KernelContext& ctx, const Tensor& like, DType dtype) {
  return like.dtype() == dtype ? like : Tensor::empty(ctx.device().allocator(), dtype, like.shape());
}

Status zero(const KernelContext& ctx, Tensor& out) {
  if (out.byte_size() == 0) return Status();
  MIRRA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.mutable_raw_data(), 0, out.byte_size(), stream_of(ctx)));
  return Status();
}

// cuDNN's fused convolution + bias + activation into `output`; false when cuDNN does not support the
// problem (nothing ran then).
graph::Expected<bool> fused_forward(const KernelContext& ctx, ConvPlan& plan, const Tensor& x, const Tensor& w,
                                    const Tensor& bias, bool relu, Tensor& output) {
  if (plan.fused_refused(relu)) return false;
  const cudnnHandle_t handle = gpu_of(ctx).cudnn();
  size_t bytes = 0;
  cudnnStatus_t status = cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x().get(), plan.w().get(), plan.conv().get(),
                                                                 plan.y().get(), kFusedAlgorithm, &bytes);
  if (status == CUDNN_STATUS_SUCCESS) {
    Tensor scratch = workspace(ctx, bytes);
    ActivationDescriptor activation;
    MIRRA_RETURN_IF_ERROR(activation.set(relu));
    const float one = 1, none = 0;
    status = cudnnConvolutionBiasActivationForward(handle, &one, plan.x().get(), x.raw_data(), plan.w().get(), w.raw_data(),
                                                   plan.conv().get(), kFusedAlgorithm, scratch.mutable_raw_data(), bytes,
                                                   &none, plan.y().get(), output.raw_data(), plan.bias().get(), bias.raw_data(),
                                                   activation.get(), plan.y().get(), output.mutable_raw_data());
  }
  if (status != CUDNN_STATUS_SUCCESS && cudnn_refused(status, plan.fused_ran(relu))) {
    plan.set_fused(relu, /*ran=*/false);
    return false;
  }
  MIRRA_RETURN_IF_ERROR(runtime::cuda::check(status, "cudnnConvolutionBiasActivationForward"));
  plan.set_fused(relu, /*ran=*/true);
  return true;
}

// The convolution of `input` by `filter` into `output`, all three of one dtype; with `fused_bias`
// (f32), the bias and maybe a ReLU applied by cuDNN's fused call where it supports the problem.
// Returns whether they were.
graph::Expected<bool> convolve(KernelContext& ctx, const Tensor& input, const Tensor& filter, const Tensor* fused_bias,
                               bool relu, Tensor& output) {
  if (input.num_elements() == 0 || filter.num_elements() == 0) {
    MIRRA_RETURN_IF_ERROR(zero(ctx, output));  // no input channels: the bias alone
    return false;
  }
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<ConvPlan> plan, plan_for(ctx, input, filter, input.dtype()));
  MIRRA_ASSIGN_OR_RETURN(const Tensor x, plan->cudnn_input(ctx, input));
  MIRRA_ASSIGN_OR_RETURN(const Tensor w, plan->cudnn_filter(ctx, filter));
  if (fused_bias != nullptr) {
    MIRRA_ASSIGN_OR_RETURN(const bool fused, fused_forward(ctx, *plan, x, w, *fused_bias, relu, output));
    if (fused) return true;
  }
  const cudnnHandle_t handle = gpu_of(ctx).cudnn();
  MIRRA_ASSIGN_OR_RETURN(const cudnnConvolutionFwdAlgo_t algorithm, plan->forward_algorithm(handle));
  size_t bytes = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x().get(), plan->w().get(), plan->conv().get(),
                                                                     plan->y().get(), algorithm, &bytes));
  Tensor scratch = workspace(ctx, bytes);
  const float one = 1, none = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnConvolutionForward(handle, &one, plan->x().get(), x.raw_data(), plan->w().get(), w.raw_data(),
                                                     plan->conv().get(), algorithm, scratch.mutable_raw_data(), bytes, &none,
                                                     plan->y().get(), output.mutable_raw_data()));
  return false;
}

// The bias (f32, or none) added per output channel to a convolution's f32 `output`, and maybe a ReLU
// after.
Status add_bias_relu(const KernelContext& ctx, const Tensor* bias, bool relu, const Window& window, Tensor& output) {
  if (bias != nullptr) {
    const int64_t inner = window.nchw ? window.out_height * window.out_width : 1;
    MIRRA_RETURN_IF_ERROR(launched(bias_add(DType::f32, output.raw_data(), bias->raw_data(), output.mutable_raw_data(),
                                            output.num_elements(), bias->dim(0), inner, stream_of(ctx)),
                                   "bias_add"));
  }
  if (relu) {
    MIRRA_RETURN_IF_ERROR(launched(unary(UnaryOp::relu, DType::f32, output.raw_data(), output.mutable_raw_data(),
                                         output.num_elements(), stream_of(ctx)),
                                   "relu"));
  }
  return Status();
}

// Conv2D, or FusedConv2D with a bias (input 2) and maybe a ReLU after it. f32 operands give an f32
// result, the bias and ReLU fused where cuDNN can. 16-bit operands are convolved in their type; a
// bias, a ReLU or an f32 result takes the sums widened to f32, and a 16-bit result is rounded from
// the f32 values at the end.
Status conv2d_forward(KernelContext& ctx, bool with_bias, bool relu) {
  const Tensor& input = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  const Tensor* bias = with_bias ? &ctx.input(2) : nullptr;
  MIRRA_RETURN_IF_ERROR(check_conv_operands(ctx, input, filter, bias, ctx.attr<std::string>("data_format") == "NCHW",
                                            ctx.attr<bool>("f32_output") ? DType::f32 : input.dtype()));
  const Window window = Window::of(ctx, input, filter.dim(0), filter.dim(1), ctx.attr<std::vector<int64_t>>("dilations"));
  Tensor& result = allocate_result(ctx, window.output_shape(filter.dim(3)));
  if (result.num_elements() == 0) return Status();
  const DType data = input.dtype();
  if (data == DType::f32) {
    MIRRA_ASSIGN_OR_RETURN(const bool fused, convolve(ctx, input, filter, bias, relu, result));
    return fused ? Status() : add_bias_relu(ctx, bias, relu, window, result);
  }
  const bool sums_are_result = bias == nullptr && result.dtype() == data;
  Tensor sums = sums_are_result ? result : Tensor::empty(ctx.device().allocator(), data, result.shape());
  MIRRA_RETURN_IF_ERROR(convolve(ctx, input, filter, /*fused_bias=*/nullptr, /*relu=*/false, sums).status());
  if (sums_are_result) return Status();
  Tensor wide = in_dtype(ctx, result, DType::f32);
  MIRRA_RETURN_IF_ERROR(cast_into(ctx, sums, wide));
  std::optional<Tensor> wide_bias;
  if (bias != nullptr && bias->dtype() != DType::f32) {
    wide_bias = Tensor::empty(ctx.device().allocator(), DType::f32, bias->shape());
    MIRRA_RETURN_IF_ERROR(cast_into(ctx, *bias, *wide_bias));
  }
  MIRRA_RETURN_IF_ERROR(add_bias_relu(ctx, wide_bias ? &*wide_bias : bias, relu, window, wide));
  return result.dtype() == DType::f32 ? Status() : cast_into(ctx, wide, result);
}

Status conv2d_kernel(KernelContext& ctx) { return conv2d_forward(ctx, /*with_bias=*/false, /*relu=*/false); }

Status fused_conv2d_kernel(KernelContext& ctx) {
  return conv2d_forward(ctx, /*with_bias=*/true, ctx.attr<std::string>("activation") == "relu");
}

// d loss / d input of Conv2D into `dx`, all in one dtype; `input` gives the shape.
Status conv2d_backprop_input(const KernelContext& ctx, const Tensor& input, const Tensor& filter, const Tensor& dy, Tensor& dx) {
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<ConvPlan> plan, plan_for(ctx, input, filter, dy.dtype()));
  MIRRA_ASSIGN_OR_RETURN(const Tensor w, plan->cudnn_filter(ctx, filter));
  const cudnnHandle_t handle = gpu_of(ctx).cudnn();
  MIRRA_ASSIGN_OR_RETURN(const cudnnConvolutionBwdDataAlgo_t algorithm, plan->backward_data_algorithm(handle));
  size_t bytes = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, plan->w().get(), plan->y().get(),
                                                                          plan->conv().get(), plan->x().get(), algorithm, &bytes));
  Tensor scratch = workspace(ctx, bytes);
  Tensor target = plan->input_gradient_target(ctx, dx);
  const float one = 1, none = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnConvolutionBackwardData(handle, &one, plan->w().get(), w.raw_data(), plan->y().get(),
                                                          dy.raw_data(), plan->conv().get(), algorithm,
                                                          scratch.mutable_raw_data(), bytes, &none, plan->x().get(),
                                                          target.mutable_raw_data()));
  return plan->keep_interior(ctx, target, dx);
}

// d loss / d filter of Conv2D into `dw`, all in one dtype; `filter` gives the shape.
Status conv2d_backprop_filter(const KernelContext& ctx, const Tensor& input, const Tensor& filter, const Tensor& dy, Tensor& dw) {
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<ConvPlan> plan, plan_for(ctx, input, filter, dy.dtype()));
  MIRRA_ASSIGN_OR_RETURN(const Tensor x, plan->cudnn_input(ctx, input));
  const cudnnHandle_t handle = gpu_of(ctx).cudnn();
  MIRRA_ASSIGN_OR_RETURN(const cudnnConvolutionBwdFilterAlgo_t algorithm, plan->backward_filter_algorithm(handle));
  size_t bytes = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan->x().get(), plan->y().get(),
                                                                            plan->conv().get(), plan->w().get(), algorithm, &bytes));
  Tensor scratch = workspace(ctx, bytes);
  const std::span<const int64_t> to_cudnn(plan->nchw() ? kHwioToKcrs : kHwioToKrsc, 4);
  Tensor gradient = Tensor::empty(ctx.device().allocator(), plan->data(), permuted_shape(filter.shape(), to_cudnn));
  const float one = 1, none = 0;
  MIRRA_CUDA_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(handle, &one, plan->x().get(), x.raw_data(), plan->y().get(),
                                                            dy.raw_data(), plan->conv().get(), algorithm,
                                                            scratch.mutable_raw_data(), bytes, &none, plan->w().get(),
                                                            gradient.mutable_raw_data()));
  const std::span<const int64_t> back(plan->nchw() ? kKcrsToHwio : kKrscToHwio, 4);
  return copy(ctx, gradient, dw, permutation(gradient.shape(), back));
}

// A backprop op on inputs (input, filter, dy) whose result has the shape of input `shaped_like`
// (which is read for nothing else), computed by `backprop` in the operands' dtype (16-bit ones on
// the tensor cores) and, for an f32_output, widened.
template <class Backprop>
Status conv2d_backprop(KernelContext& ctx, size_t shaped_like, Backprop backprop) {
  Tensor& result = allocate_result(ctx, ctx.input(shaped_like).shape());
  for (size_t i = 0; i < 3; ++i) {
    if (i != shaped_like && ctx.input(i).num_elements() == 0) return zero(ctx, result);
  }
  if (result.num_elements() == 0) return Status();
  const DType data = ctx.input(2).dtype();
  Tensor sums = in_dtype(ctx, result, data);
  MIRRA_RETURN_IF_ERROR(backprop(ctx, ctx.input(0), ctx.input(1), ctx.input(2), sums));
  return result.dtype() == data ? Status() : cast_into(ctx, sums, result);
}

Status conv2d_backprop_input_kernel(KernelContext& ctx) { return conv2d_backprop(ctx, 0, conv2d_backprop_input); }

Status conv2d_backprop_filter_kernel(KernelContext& ctx) { return conv2d_backprop(ctx, 1, conv2d_backprop_filter); }

}  // namespace

void register_gpu_conv_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::bf16, DType::f16});
  const auto conv = [&](runtime::KernelFn fn) {
    return runtime::KernelDef{
        .fn = fn, .expensive = true, .dtypes = floats, .operand_dtypes = floats, .prepare = prepare_conv_kernel};
  };
  kernels.add("Conv2D", DeviceKind::gpu, conv(conv2d_kernel));
  kernels.add("FusedConv2D", DeviceKind::gpu, conv(fused_conv2d_kernel));
  kernels.add("Conv2DBackpropInput", DeviceKind::gpu, conv(conv2d_backprop_input_kernel));
  kernels.add("Conv2DBackpropFilter", DeviceKind::gpu, conv(conv2d_backprop_filter_kernel));
}

}  // namespace mirra::ops::cuda
