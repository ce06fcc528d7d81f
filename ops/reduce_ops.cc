// ReduceSum, ReduceMean, ReduceMax and ArgMax: schemas, builders and CPU kernels.
#include <algorithm>
#include <limits>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/op_families.h"
#include "ops/reduce_ops.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

enum class Reduction { sum, mean, max };

// Sorted, unique, non-negative axes (all dims when `axes` is empty); nullopt when one is out of range.
std::optional<std::vector<int>> reduced_axes(const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t axis : axes) {
    const auto normalized = normalize_axis(axis, rank);
    if (!normalized) return std::nullopt;
    out.push_back(*normalized);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

template <class T, Reduction kReduction>
void reduce_into(const Tensor& x, const std::vector<int>& axes, T* out) {
  const int rank = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int axis : axes) reduced[static_cast<size_t>(axis)] = true;
  // Dims and input strides of the kept dims (in output order) and of the reduced dims.
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = stride;
    stride *= x.dim(d);
  }
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (int d = 0; d < rank; ++d) {
    const bool is_reduced = reduced[static_cast<size_t>(d)];
    (is_reduced ? red_dims : kept_dims).push_back(x.dim(d));
    (is_reduced ? red_strides : kept_strides).push_back(strides[static_cast<size_t>(d)]);
  }
  int64_t outputs = 1, count = 1;
  for (int64_t d : kept_dims) outputs *= d;
  for (int64_t d : red_dims) count *= d;
  const T* in = x.data<T>();
  const T init = kReduction == Reduction::max ? std::numeric_limits<T>::lowest() : T(0);
  const int64_t grain = std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(count, 1));
  cpu::parallel_for(outputs, grain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(red_dims.size());
    for (int64_t o = begin; o < end; ++o) {
      int64_t base = 0, rest = o;
      for (size_t k = kept_dims.size(); k-- > 0;) {
        base += (rest % kept_dims[k]) * kept_strides[k];
        rest /= kept_dims[k];
      }
      T acc = init;
      std::fill(index.begin(), index.end(), 0);
      int64_t offset = base;
      for (int64_t r = 0; r < count; ++r) {
        const T v = in[offset];
        acc = kReduction == Reduction::max ? std::max(acc, v) : acc + v;
        // Odometer step over the reduced dims, innermost first.
        for (size_t k = red_dims.size(); k-- > 0;) {
          offset += red_strides[k];
          if (++index[k] < red_dims[k]) break;
          offset -= red_strides[k] * red_dims[k];
          index[k] = 0;
        }
      }
      out[o] = kReduction == Reduction::mean ? acc / static_cast<T>(count) : acc;
    }
  });
}

TensorShape reduced_shape(const TensorShape& in, const std::vector<int>& axes, bool keep_dims) {
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    const bool is_reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!is_reduced) {
      dims.push_back(in.dim(d));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  return TensorShape(dims);
}

template <Reduction kReduction>
Status reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto axes = *reduced_axes(ctx.attr<std::vector<int64_t>>("axes"), x.rank());
  Tensor& y = ctx.allocate_output(0, x.dtype(), reduced_shape(x.shape(), axes, ctx.attr<bool>("keep_dims")));
  return cpu::visit_dtype<float, double, int32_t, int64_t>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    reduce_into<T, kReduction>(x, axes, y.mutable_data<T>());
    return Status();
  });
}

Expected<std::vector<TensorType>> infer_reduce(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
  const Shape& in = ctx.input(0).shape;
  const auto axes = reduced_axes(ctx.attr<std::vector<int64_t>>("axes"), in.rank());
  if (!axes) return ctx.error("an axis is out of range");
  const bool keep = ctx.attr<bool>("keep_dims");
  Shape out;
  for (int d = 0; d < in.rank(); ++d) {
    const bool is_reduced = std::find(axes->begin(), axes->end(), d) != axes->end();
    if (!is_reduced) {
      out.dims.push_back(in.dim(d));
    } else if (keep) {
      out.dims.push_back(1);
    }
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

Status argmax_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int axis = *normalize_axis(ctx.attr<int64_t>("axis"), x.rank());
  const int64_t n = x.dim(axis);
  int64_t outer = 1, inner = 1;
  std::vector<int64_t> dims;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) inner *= x.dim(d);
    if (d != axis) dims.push_back(x.dim(d));
  }
  if (n == 0 && outer * inner > 0) return graph::invalid_argument("argmax over an empty dim of " + x.type_string());
  Tensor& y = ctx.allocate_output(0, DType::i64, TensorShape(dims));
  int64_t* out = y.mutable_data<int64_t>();
  return cpu::visit_dtype<float, double, int32_t, int64_t>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const T* in = x.data<T>();
    cpu::parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* base = in + (o / inner) * n * inner + o % inner;
        int64_t best = 0;
        for (int64_t i = 1; i < n; ++i) {
          if (base[i * inner] > base[best * inner]) best = i;
        }
        out[o] = best;
      }
    });
    return Status();
  });
}

void register_reduce(const char* name, runtime::KernelFn kernel, graph::OpRegistry& schemas,
                     runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = name,
                              .inputs = {"x"},
                              .attrs = {{"axes", AttrType::int_list, std::vector<int64_t>{}},
                                        {"keep_dims", AttrType::boolean, false}},
                              .traits = graph::kReduction,
                              .infer = infer_reduce,
                              .summary = "Reduces over axes (empty: all)."});
  kernels.add(name, graph::DeviceKind::cpu, {kernel});
}

ValueRef reduce(Builder& b, const char* op, ValueRef x, std::vector<int64_t> axes, bool keep_dims) {
  return b.add_value({.op = op, .inputs = {x}, .attrs = {{"axes", std::move(axes)}, {"keep_dims", keep_dims}}});
}

}  // namespace

void register_reduce_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_reduce("ReduceSum", reduce_kernel<Reduction::sum>, schemas, kernels);
  register_reduce("ReduceMean", reduce_kernel<Reduction::mean>, schemas, kernels);
  register_reduce("ReduceMax", reduce_kernel<Reduction::max>, schemas, kernels);
  schemas.add(graph::OpSchema{
      .name = "ArgMax",
      .inputs = {"x"},
      .attrs = {{"axis", AttrType::integer, {}}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
        const Shape& in = ctx.input(0).shape;
        const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), in.rank());
        if (!axis) return ctx.error("axis is out of range");
        Shape out;
        for (int d = 0; d < in.rank(); ++d) {
          if (d != *axis) out.dims.push_back(in.dim(d));
        }
        return std::vector<TensorType>{{DType::i64, out}};
      },
      .summary = "Index of the largest element along axis (the first, on ties)."});
  kernels.add("ArgMax", graph::DeviceKind::cpu, {argmax_kernel});
}

ValueRef reduce_sum(Builder& b, ValueRef x, std::vector<int64_t> axes, bool keep_dims) {
  return reduce(b, "ReduceSum", x, std::move(axes), keep_dims);
}
ValueRef reduce_mean(Builder& b, ValueRef x, std::vector<int64_t> axes, bool keep_dims) {
  return reduce(b, "ReduceMean", x, std::move(axes), keep_dims);
}
ValueRef reduce_max(Builder& b, ValueRef x, std::vector<int64_t> axes, bool keep_dims) {
  return reduce(b, "ReduceMax", x, std::move(axes), keep_dims);
}
ValueRef argmax(Builder& b, ValueRef x, int64_t axis) {
  return b.add_value({.op = "ArgMax", .inputs = {x}, .attrs = {{"axis", axis}}});
}

}  // namespace mirra::ops
