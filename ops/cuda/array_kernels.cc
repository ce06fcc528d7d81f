// GPU kernels of the array ops, host side: Transpose, Tile, Slice, Pad, Concat and Split as box copies
// between strided layouts; Softmax and LogSoftmax over the last dim; OneHot. Shapes and errors as
// on the CPU.
#include "ops/cuda/box_copy.h"
#include "ops/kernel_shapes.h"
#include "ops/shape_inference.h"

namespace mirra::ops::cuda {

namespace {

using graph::DeviceKind;
using graph::DType;

Status transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& perm = ctx.attr<std::vector<int64_t>>("perm");
  Tensor& y = ctx.allocate_output(0, x.dtype(), permuted_shape(x.shape(), perm));
  return copy(ctx, x, y, permutation(x.shape(), perm));
}

Status tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape shape, tile_shape(ctx, x.shape()));
  Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
  if (y.num_elements() == 0) return Status();
  MIRRA_ASSIGN_OR_RETURN(const BoxCopy box, tiling(x.shape(), ctx.attr<std::vector<int64_t>>("multiples")));
  return copy(ctx, x, y, box);
}

Status slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape box, slice_box(ctx, x));
  Tensor& y = ctx.allocate_output(0, x.dtype(), box);
  const int64_t origin[kMaxRank] = {};
  return copy(ctx, x, y, box_between(x.shape(), ctx.attr<std::vector<int64_t>>("begin").data(), box, origin, box));
}

Status pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t origin[kMaxRank] = {};
  const TensorShape out_shape = padded_shape(ctx, x, origin);
  Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
  MIRRA_RETURN_IF_ERROR(
      launched(fill(y.dtype(), ctx.attr<double>("constant_value"), y.mutable_raw_data(), y.num_elements(), stream_of(ctx)), "fill"));
  const int64_t from_origin[kMaxRank] = {};
  return copy(ctx, x, y, box_between(x.shape(), from_origin, out_shape, origin, x.shape()));
}

Status concat_kernel(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  const int axis = *normalize_axis(ctx.attr<int64_t>("axis"), first.rank());
  MIRRA_ASSIGN_OR_RETURN(const TensorShape out_shape, concat_shape(ctx, axis));
  Tensor& y = ctx.allocate_output(0, first.dtype(), out_shape);
  int64_t to_origin[kMaxRank] = {};
  const int64_t from_origin[kMaxRank] = {};
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    MIRRA_RETURN_IF_ERROR(copy(ctx, x, y, box_between(x.shape(), from_origin, out_shape, to_origin, x.shape())));
    to_origin[axis] += x.dim(axis);
  }
  return Status();
}

Status split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int axis = *normalize_axis(ctx.attr<int64_t>("axis"), x.rank());
  const int64_t parts = ctx.attr<int64_t>("num_split");
  MIRRA_ASSIGN_OR_RETURN(const TensorShape part, split_part_shape(x, axis, parts));
  int64_t from_origin[kMaxRank] = {};
  const int64_t to_origin[kMaxRank] = {};
  for (int64_t i = 0; i < parts; ++i) {
    Tensor& y = ctx.allocate_output(static_cast<size_t>(i), x.dtype(), part);
    MIRRA_RETURN_IF_ERROR(copy(ctx, x, y, box_between(x.shape(), from_origin, part, to_origin, part)));
    from_origin[axis] += part.dim(axis);
  }
  return Status();
}

template <bool kLog>
Status softmax_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  const int64_t classes = x.dim(x.rank() - 1);
  if (classes == 0) return Status();
  return launched(softmax(x.dtype(), kLog, x.raw_data(), y.mutable_raw_data(), x.num_elements() / classes, classes,
                          stream_of(ctx)),
                  "softmax");
}

Status one_hot_kernel(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const int64_t depth = ctx.attr<int64_t>("depth");
  std::vector<int64_t> dims = indices.shape().to_vector();
  dims.push_back(depth);
  if (dims.size() > static_cast<size_t>(kMaxRank)) return graph::invalid_argument("one-hot output rank is too high");
  Tensor& y = ctx.allocate_output(0, ctx.attr<DType>("dtype"), TensorShape(dims));
  return launched(one_hot(indices.dtype(), y.dtype(), indices.raw_data(), y.mutable_raw_data(), indices.num_elements(), depth,
                          ctx.attr<double>("on_value"), ctx.attr<double>("off_value"), stream_of(ctx)),
                  "one_hot");
}

}  // namespace

void register_gpu_array_kernels(runtime::KernelRegistry& kernels) {
  const uint32_t floats = runtime::dtype_mask({DType::f32, DType::f64});
  kernels.add("Transpose", DeviceKind::gpu, {transpose_kernel});
  kernels.add("Tile", DeviceKind::gpu, {tile_kernel});
  kernels.add("Slice", DeviceKind::gpu, {slice_kernel});
  kernels.add("Pad", DeviceKind::gpu, {pad_kernel});
  kernels.add("Concat", DeviceKind::gpu, {concat_kernel});
  kernels.add("Split", DeviceKind::gpu, {split_kernel});
  kernels.add("Softmax", DeviceKind::gpu, {.fn = softmax_kernel<false>, .dtypes = floats});
  kernels.add("LogSoftmax", DeviceKind::gpu, {.fn = softmax_kernel<true>, .dtypes = floats});
  kernels.add("OneHot", DeviceKind::gpu, {.fn = one_hot_kernel, .dtypes = floats});
}

}  // namespace mirra::ops::cuda
