// MaxPool, AvgPool and their gradients on the GPU, host side: the node's window as a PoolGeometry
// (MaxPoolGrad with through_relu then masks by the input, as ReluGrad does, and with channel_sums
// reduces its output over all but the channel dim).
#include "ops/cuda/cudnn_window.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

// The node's pooling window over `input`.
Window pool_window(const KernelContext& ctx, const Tensor& input) {
  const auto& ksize = ctx.attr<std::vector<int64_t>>("ksize");
  return Window::of(ctx, input, ksize[0], ksize[1], {1, 1});
}

PoolGeometry pool_geometry(const Window& w) {
  return {.nchw = w.nchw,
          .batch = w.batch,
          .channels = w.channels,
          .height = w.height,
          .width = w.width,
          .out_height = w.out_height,
          .out_width = w.out_width,
          .window_h = w.window_h,
          .window_w = w.window_w,
          .stride_h = w.stride_h,
          .stride_w = w.stride_w,
          .pad_h = w.pad_h,
          .pad_w = w.pad_w};
}

template <bool kMax>
Status pool_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Window w = pool_window(ctx, input);
  Tensor& output = ctx.allocate_output(0, DType::f32, w.output_shape(w.channels));
  return launched(pool_forward(kMax, input.data<float>(), output.mutable_data<float>(), pool_geometry(w), stream_of(ctx)),
                  "pool_forward");
}

template <bool kMax>
Status pool_grad_kernel(KernelContext& ctx) {
  const Tensor& input = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const Window w = pool_window(ctx, input);
  if (!(dy.shape() == w.output_shape(w.channels))) {
    return graph::invalid_argument("dy " + dy.type_string() + " does not match the pooled shape of " + input.type_string());
  }
  Tensor& dx = ctx.allocate_output(0, input.dtype(), input.shape());
  MIRRA_RETURN_IF_ERROR(launched(pool_backward(kMax, input.data<float>(), dy.data<float>(), dx.mutable_data<float>(),
                                               pool_geometry(w), stream_of(ctx)),
                                 "pool_backward"));
  if (!kMax) return Status();
  if (ctx.attr<bool>("through_relu")) {
    // Through the ReLU whose output the input is: in place, zero where the input is not positive.
    MIRRA_RETURN_IF_ERROR(launched(relu_grad(DType::f32, dx.raw_data(), input.raw_data(), dx.mutable_raw_data(),
                                             dx.num_elements(), stream_of(ctx)),
                                   "relu_grad"));
  }
  if (!ctx.attr<bool>("channel_sums")) return Status();
  // Output 1: dx summed over all but the channel dim.
  Tensor& sums = ctx.allocate_output(1, DType::f32, TensorShape{w.channels});
  const std::vector<int> axes = w.nchw ? std::vector<int>{0, 2, 3} : std::vector<int>{0, 1, 2};
  return launched(reduce(ReduceOp::sum, DType::f32, dx.raw_data(), sums.mutable_raw_data(), reduce_geometry(dx.shape(), axes),
                         stream_of(ctx)),
                  "reduce");
}

}  // namespace

void register_gpu_pool_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t f32 = runtime::dtype_mask({DType::f32});
  kernels.add("MaxPool", DeviceKind::gpu, {.fn = pool_kernel<true>, .expensive = true, .dtypes = f32});
  kernels.add("AvgPool", DeviceKind::gpu, {.fn = pool_kernel<false>, .expensive = true, .dtypes = f32});
  // dx takes dy's dtype: the input's is named as well.
  kernels.add("MaxPoolGrad", DeviceKind::gpu,
              {.fn = pool_grad_kernel<true>, .expensive = true, .dtypes = f32, .operand_dtypes = f32});
  kernels.add("AvgPoolGrad", DeviceKind::gpu,
              {.fn = pool_grad_kernel<false>, .expensive = true, .dtypes = f32, .operand_dtypes = f32});
}

}  // namespace mirra::ops::cuda
