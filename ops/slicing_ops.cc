// Concat, Split, Slice and Pad: schemas, builders and CPU kernels. All move bytes only, so they work
// for every dtype; Concat, Split and Slice share one box copy, and Pad writes each row of its result once.
#include "ops/array_ops.h"

#include <cstring>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/element_copy.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_math.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// Row-major strides of `shape`, in elements.
void strides_of(const TensorShape& shape, int64_t* strides) {
  int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape.dim(d);
  }
}

// body(row, index) for rows [begin, end) of `shape` (a row: one index into every dim but the last),
// index the row's index in each of those dims, counted on from row to row instead of divided out.
template <class Body>
void for_rows(const TensorShape& shape, int64_t begin, int64_t end, const Body& body) {
  const int outer = shape.rank() - 1;
  int64_t index[runtime::kMaxRank] = {};
  for (int64_t d = outer - 1, rest = begin; d >= 0; --d) {
    index[d] = rest % shape.dim(static_cast<int>(d));
    rest /= shape.dim(static_cast<int>(d));
  }
  for (int64_t row = begin; row < end; ++row) {
    body(row, static_cast<const int64_t*>(index));
    for (int d = outer - 1; d >= 0 && ++index[d] == shape.dim(d); --d) index[d] = 0;
  }
}

// Copies the box of size `box` at `src_origin` in `src` to `dst_origin` in `dst` (same rank and dtype).
void copy_box(const Tensor& src, const int64_t* src_origin, Tensor& dst, const int64_t* dst_origin, const TensorShape& box) {
  const int rank = box.rank();
  if (box.num_elements() == 0) return;
  int64_t src_strides[runtime::kMaxRank] = {}, dst_strides[runtime::kMaxRank] = {};
  strides_of(src.shape(), src_strides);
  strides_of(dst.shape(), dst_strides);
  const int64_t inner = rank > 0 ? box.dim(rank - 1) : 1;
  const int64_t rows = box.num_elements() / inner;
  cpu::with_element_type(src.dtype(), [&]<class E>(std::type_identity<E>) {
    const E* in = static_cast<const E*>(src.raw_data());
    E* out = static_cast<E*>(dst.mutable_raw_data());
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kElementwiseGrain / inner), [&](int64_t begin, int64_t end) {
      for_rows(box, begin, end, [&](int64_t, const int64_t* index) {
        int64_t src_offset = rank > 0 ? src_origin[rank - 1] : 0, dst_offset = rank > 0 ? dst_origin[rank - 1] : 0;
        for (int d = 0; d < rank - 1; ++d) {
          src_offset += (index[d] + src_origin[d]) * src_strides[d];
          dst_offset += (index[d] + dst_origin[d]) * dst_strides[d];
        }
        std::copy_n(in + src_offset, inner, out + dst_offset);
      });
    });
  });
}

// ---- Concat ----

Status concat_kernel(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  const int axis = *normalize_axis(ctx.attr<int64_t>("axis"), first.rank());
  MIRRA_ASSIGN_OR_RETURN(const TensorShape out_shape, concat_shape(ctx, axis));
  Tensor& y = ctx.allocate_output(0, first.dtype(), out_shape);
  int64_t dst_origin[runtime::kMaxRank] = {};
  const int64_t src_origin[runtime::kMaxRank] = {};
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    copy_box(ctx.input(i), src_origin, y, dst_origin, ctx.input(i).shape());
    dst_origin[axis] += ctx.input(i).dim(axis);
  }
  return Status();
}

Expected<std::vector<TensorType>> infer_concat(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_same_dtype(ctx));
  const Shape& first = ctx.input(0).shape;
  const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), first.rank());
  if (!axis) return ctx.error("axis is out of range");
  Shape out = first;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Shape& x = ctx.input(i).shape;
    if (x.rank() != first.rank()) return ctx.error("inputs must have the same rank");
    for (int d = 0; d < first.rank(); ++d) {
      if (d == *axis) {
        int64_t sum = -1;
        if (out.dim(d) >= 0 && x.dim(d) >= 0 && __builtin_add_overflow(out.dim(d), x.dim(d), &sum)) {
          return ctx.error("the concat dim's sizes overflow int64");
        }
        out.dims[static_cast<size_t>(d)] = sum;
      } else if (x.dim(d) >= 0 && out.dim(d) >= 0 && x.dim(d) != out.dim(d)) {
        return ctx.error("inputs differ off the concat axis");
      } else if (out.dim(d) < 0) {
        out.dims[static_cast<size_t>(d)] = x.dim(d);
      }
    }
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

// ---- Split ----

Status split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int axis = *normalize_axis(ctx.attr<int64_t>("axis"), x.rank());
  const int64_t parts = ctx.attr<int64_t>("num_split");
  MIRRA_ASSIGN_OR_RETURN(const TensorShape part_shape, split_part_shape(x, axis, parts));
  int64_t src_origin[runtime::kMaxRank] = {};
  const int64_t dst_origin[runtime::kMaxRank] = {};
  for (int64_t i = 0; i < parts; ++i) {
    Tensor& y = ctx.allocate_output(static_cast<size_t>(i), x.dtype(), part_shape);
    copy_box(x, src_origin, y, dst_origin, part_shape);
    src_origin[axis] += part_shape.dim(axis);
  }
  return Status();
}

Expected<std::vector<TensorType>> infer_split(const InferContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), in.rank());
  if (!axis) return ctx.error("axis is out of range");
  const int64_t parts = ctx.attr<int64_t>("num_split");
  if (parts < 1 || parts > 65535) return ctx.error("num_split must be in [1, 65535]");
  Shape part = in;
  const int64_t dim = in.dim(*axis);
  if (dim >= 0 && dim % parts != 0) return ctx.error("the split dim does not divide into num_split equal parts");
  part.dims[static_cast<size_t>(*axis)] = dim < 0 ? -1 : dim / parts;
  return std::vector<TensorType>(static_cast<size_t>(parts), TensorType{ctx.input(0).dtype, part});
}

// ---- Slice ----

Status slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape box, slice_box(ctx, x));
  Tensor& y = ctx.allocate_output(0, x.dtype(), box);
  const int64_t dst_origin[runtime::kMaxRank] = {};
  copy_box(x, ctx.attr<std::vector<int64_t>>("begin").data(), y, dst_origin, box);
  return Status();
}

Expected<std::vector<TensorType>> infer_slice(const InferContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const auto& begin = ctx.attr<std::vector<int64_t>>("begin");
  const auto& size = ctx.attr<std::vector<int64_t>>("size");
  if (static_cast<int>(begin.size()) != in.rank() || static_cast<int>(size.size()) != in.rank()) {
    return ctx.error("begin and size need one entry per dim");
  }
  Shape out = in;
  for (int d = 0; d < in.rank(); ++d) {
    const auto i = static_cast<size_t>(d);
    if (begin[i] < 0 || size[i] < -1) return ctx.error("begin must be >= 0 and size >= -1");
    int64_t end = 0;
    if (__builtin_add_overflow(begin[i], std::max<int64_t>(size[i], 0), &end)) return ctx.error("begin + size overflows int64");
    if (in.dim(d) >= 0 && (begin[i] > in.dim(d) || end > in.dim(d))) {
      return ctx.error("slice goes past dim " + std::to_string(d));
    }
    out.dims[i] = size[i] >= 0 ? size[i] : (in.dim(d) >= 0 ? in.dim(d) - begin[i] : -1);
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

// ---- Pad ----

// Each row of y (every dim but the last) is written once, in parallel: x's row between the value's
// padding where the row lies in x's box, the value alone elsewhere.
Status pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t origin[runtime::kMaxRank] = {};
  Tensor& y = ctx.allocate_output(0, x.dtype(), padded_shape(ctx, x, origin));
  const double value = ctx.attr<double>("constant_value");
  const int rank = y.rank();
  if (y.num_elements() == 0) return Status();
  if (rank == 0) {  // a scalar has nothing to pad
    std::memcpy(y.mutable_raw_data(), x.raw_data(), y.byte_size());
    return Status();
  }
  const int64_t inner = y.dim(rank - 1), inner_x = x.dim(rank - 1), before = origin[rank - 1];
  int64_t x_strides[runtime::kMaxRank] = {};
  strides_of(x.shape(), x_strides);
  using graph::bfloat16, graph::float16;
  return cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(
      y.dtype(), [&]<class T>(cpu::Type<T>) {
        const T fill = math::convert<T>(value);
        const T* in = x.data<T>();
        T* out = y.mutable_data<T>();
        cpu::parallel_for(y.num_elements() / inner, std::max<int64_t>(1, cpu::kElementwiseGrain / inner),
                          [&](int64_t begin, int64_t end) {
          for_rows(y.shape(), begin, end, [&](int64_t row, const int64_t* index) {
            T* dst = out + row * inner;
            int64_t src = 0;
            bool in_x = inner_x > 0;
            for (int d = 0; in_x && d < rank - 1; ++d) {
              const int64_t i = index[d] - origin[d];
              in_x = i >= 0 && i < x.dim(d);
              src += i * x_strides[d];
            }
            if (!in_x) {
              std::fill_n(dst, inner, fill);
              return;
            }
            std::fill_n(dst, before, fill);
            std::copy_n(in + src, inner_x, dst + before);
            std::fill_n(dst + before + inner_x, inner - before - inner_x, fill);
          });
        });
        return Status();
      });
}

Expected<std::vector<TensorType>> infer_pad(const InferContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const auto& paddings = ctx.attr<std::vector<int64_t>>("paddings");
  if (static_cast<int>(paddings.size()) != 2 * in.rank()) return ctx.error("paddings needs a (before, after) pair per dim");
  Shape out = in;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t before = paddings[2 * static_cast<size_t>(d)];
    const int64_t after = paddings[2 * static_cast<size_t>(d) + 1];
    // Bounded like window attributes: a padding also applies to a dim known only at run time.
    constexpr int64_t kMaxPadding = int64_t{1} << 31;
    if (before < 0 || after < 0 || before > kMaxPadding || after > kMaxPadding) {
      return ctx.error("paddings must be in [0, 2^31]");
    }
    int64_t padded = 0;
    if (__builtin_add_overflow(before, after, &padded) ||
        (in.dim(d) >= 0 && __builtin_add_overflow(in.dim(d), padded, &padded))) {
      return ctx.error("paddings of dim " + std::to_string(d) + " make its size overflow int64");
    }
    if (in.dim(d) >= 0) out.dims[static_cast<size_t>(d)] = padded;
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

// ---- gradients ----

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// Each input's gradient is its slice of dy; along the axis only the last input may be of unknown size.
Grads concat_grad(GradientContext& g) {
  auto& b = g.builder;
  const int rank = g.input_types[0].shape.rank();
  const int axis = *normalize_axis(g.attr<int64_t>("axis"), rank);
  Grads grads;
  int64_t offset = 0;
  for (size_t i = 0; i < g.input_types.size(); ++i) {
    const Shape& shape = g.input_types[i].shape;
    std::vector<int64_t> begin(static_cast<size_t>(rank), 0), size(static_cast<size_t>(rank), -1);
    begin[static_cast<size_t>(axis)] = offset;
    const int64_t extent = shape.dim(axis);
    if (extent < 0 && i + 1 != g.input_types.size()) {
      b.fail(graph::unimplemented("node '" + g.node.name + "': gradient of Concat needs known sizes along its axis"));
      return {};
    }
    size[static_cast<size_t>(axis)] = extent;
    grads.push_back(slice(b, g.grad(0), begin, size));
    offset += extent;
  }
  return grads;
}

Grads split_grad(GradientContext& g) {
  auto& b = g.builder;
  std::vector<ValueRef> parts;
  for (size_t k = 0; k < g.outputs.size(); ++k) parts.push_back(g.grad(k).valid() ? g.grad(k) : zeros_like(b, g.output(k)));
  return {concat(b, parts, g.attr<int64_t>("axis"))};
}

// Slice's gradient pads dy back to the input's shape; Pad's slices it out.
Grads slice_grad(GradientContext& g) {
  const Shape& in = g.input_types[0].shape;
  const auto& begin = g.attr<std::vector<int64_t>>("begin");
  const auto& size = g.attr<std::vector<int64_t>>("size");
  std::vector<int64_t> paddings;
  for (int d = 0; d < in.rank(); ++d) {
    const auto i = static_cast<size_t>(d);
    int64_t after = 0;
    if (size[i] >= 0) {
      if (in.dim(d) < 0) {
        g.builder.fail(graph::unimplemented("node '" + g.node.name + "': gradient of Slice needs known dims"));
        return {};
      }
      after = in.dim(d) - begin[i] - size[i];
    }
    paddings.push_back(begin[i]);
    paddings.push_back(after);
  }
  return {pad(g.builder, g.grad(0), paddings)};
}

Grads pad_grad(GradientContext& g) {
  const Shape& in = g.input_types[0].shape;
  const auto& paddings = g.attr<std::vector<int64_t>>("paddings");
  std::vector<int64_t> begin, size;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t after = paddings[2 * static_cast<size_t>(d) + 1];
    if (in.dim(d) < 0 && after != 0) {
      g.builder.fail(graph::unimplemented("node '" + g.node.name + "': gradient of Pad needs known dims where it pads after"));
      return {};
    }
    begin.push_back(paddings[2 * static_cast<size_t>(d)]);
    size.push_back(in.dim(d));  // -1 (unknown) runs to the end, which is right when nothing is padded after
  }
  return {slice(g.builder, g.grad(0), begin, size)};
}

}  // namespace

void register_slicing_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  using graph::DeviceKind;
  schemas.add(graph::OpSchema{.name = "Concat",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = {{"axis", AttrType::integer, {}}},
                              .infer = infer_concat,
                              .summary = "Joins its inputs along axis.",
                              .gradient = concat_grad});
  kernels.add("Concat", DeviceKind::cpu, {concat_kernel});
  schemas.add(graph::OpSchema{.name = "Split",
                              .inputs = {"x"},
                              .attrs = {{"axis", AttrType::integer, {}}, {"num_split", AttrType::integer, {}}},
                              .infer = infer_split,
                              .summary = "Cuts its input along axis into num_split equal parts.",
                              .gradient = split_grad});
  kernels.add("Split", DeviceKind::cpu, {split_kernel});
  schemas.add(graph::OpSchema{.name = "Slice",
                              .inputs = {"x"},
                              .attrs = {{"begin", AttrType::int_list, {}}, {"size", AttrType::int_list, {}}},
                              .moves_values = {0},
                              .infer = infer_slice,
                              .summary = "The box of `size` at `begin`; size -1 runs to the end of a dim.",
                              .gradient = slice_grad});
  kernels.add("Slice", DeviceKind::cpu, {slice_kernel});
  schemas.add(graph::OpSchema{.name = "Pad",
                              .inputs = {"x"},
                              .attrs = {{"paddings", AttrType::int_list, {}}, {"constant_value", AttrType::real, 0.0}},
                              .infer = infer_pad,
                              .summary = "Pads each dim with constant_value before and after.",
                              .gradient = pad_grad});
  kernels.add("Pad", DeviceKind::cpu, {pad_kernel});
}

ValueRef concat(Builder& b, const std::vector<ValueRef>& values, int64_t axis) {
  return b.add_value({.op = "Concat", .inputs = values, .attrs = {{"axis", axis}}});
}

std::vector<ValueRef> split(Builder& b, ValueRef x, int64_t axis, int64_t num_split) {
  const graph::NodeId id = b.add({.op = "Split", .inputs = {x}, .attrs = {{"axis", axis}, {"num_split", num_split}}});
  if (id == graph::kInvalidNode) return std::vector<ValueRef>(static_cast<size_t>(std::clamp<int64_t>(num_split, 0, 65535)));
  std::vector<ValueRef> parts;
  for (int64_t i = 0; i < num_split; ++i) parts.push_back({id, static_cast<uint16_t>(i)});
  return parts;
}

ValueRef slice(Builder& b, ValueRef x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  return b.add_value({.op = "Slice", .inputs = {x}, .attrs = {{"begin", std::move(begin)}, {"size", std::move(size)}}});
}

ValueRef pad(Builder& b, ValueRef x, std::vector<int64_t> paddings, double constant_value) {
  return b.add_value(
      {.op = "Pad", .inputs = {x}, .attrs = {{"paddings", std::move(paddings)}, {"constant_value", constant_value}}});
}

}  // namespace mirra::ops
