// Run-time shape checks and output geometry shared by the CPU and GPU kernels.
#include "ops/kernel_shapes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/broadcast.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

graph::Expected<TensorShape> concat_shape(const KernelContext& ctx, int axis) {
  const Tensor& first = ctx.input(0);
  TensorShape out_shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    for (int d = 0; d < first.rank(); ++d) {
      if (d != axis && x.dim(d) != first.dim(d)) {
        return graph::invalid_argument("input " + std::to_string(i) + " " + x.type_string() + " does not match input 0 " +
                                       first.type_string() + " off the concat axis");
      }
    }
    total += x.dim(axis);
  }
  out_shape.set_dim(axis, total);
  return out_shape;
}

graph::Expected<TensorShape> split_part_shape(const Tensor& x, int axis, int64_t parts) {
  if (x.dim(axis) % parts != 0) {
    return graph::invalid_argument("dim " + std::to_string(axis) + " of " + x.type_string() + " does not split into " +
                                   std::to_string(parts) + " equal parts");
  }
  TensorShape part = x.shape();
  part.set_dim(axis, x.dim(axis) / parts);
  return part;
}

graph::Expected<TensorShape> slice_box(const KernelContext& ctx, const Tensor& x) {
  const auto& begin = ctx.attr<std::vector<int64_t>>("begin");
  const auto& size = ctx.attr<std::vector<int64_t>>("size");
  TensorShape box = x.shape();
  for (int d = 0; d < x.rank(); ++d) {
    const auto i = static_cast<size_t>(d);
    const int64_t extent = size[i] < 0 ? x.dim(d) - begin[i] : size[i];
    if (begin[i] > x.dim(d) || extent < 0 || begin[i] + extent > x.dim(d)) {
      return graph::invalid_argument("slice begin " + graph::attr_to_string(begin) + " size " + graph::attr_to_string(size) +
                                     " is outside " + x.type_string());
    }
    box.set_dim(d, extent);
  }
  return box;
}

TensorShape padded_shape(const KernelContext& ctx, const Tensor& x, int64_t* origin) {
  const auto& paddings = ctx.attr<std::vector<int64_t>>("paddings");
  TensorShape out_shape = x.shape();
  for (int d = 0; d < x.rank(); ++d) {
    origin[d] = paddings[2 * static_cast<size_t>(d)];
    out_shape.set_dim(d, x.dim(d) + origin[d] + paddings[2 * static_cast<size_t>(d) + 1]);
  }
  return out_shape;
}

graph::Expected<TensorShape> select_shape(const Tensor& condition, const Tensor& then_value, const Tensor& else_value) {
  const auto values = cpu::broadcast_shape(then_value.shape(), else_value.shape());
  const auto all = values ? cpu::broadcast_shape(condition.shape(), *values) : std::nullopt;
  if (!all) {
    return graph::invalid_argument("condition " + condition.type_string() + ", then " + then_value.type_string() + " and else " +
                                   else_value.type_string() + " do not broadcast together");
  }
  return *all;
}

graph::Expected<TensorShape> tile_shape(const KernelContext& ctx, const TensorShape& x) {
  const auto& multiples = ctx.attr<std::vector<int64_t>>("multiples");
  if (static_cast<int>(multiples.size()) != x.rank()) {
    return graph::invalid_argument(std::to_string(multiples.size()) + " multiples for " + x.to_string() + ": one per dim is needed");
  }
  TensorShape out = x;
  for (int d = 0; d < x.rank(); ++d) {
    int64_t dim = 0;
    if (__builtin_mul_overflow(x.dim(d), multiples[static_cast<size_t>(d)], &dim)) {
      return graph::invalid_argument("tiling " + x.to_string() + " overflows int64");
    }
    out.set_dim(d, dim);
  }
  return out;
}

graph::Expected<TensorShape> expand_dims_shape(const KernelContext& ctx, const TensorShape& x) {
  const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), x.rank() + 1);
  if (!axis || x.rank() >= runtime::kMaxRank) {
    return graph::invalid_argument("cannot insert a dim at axis " + std::to_string(ctx.attr<int64_t>("axis")) + " of " + x.to_string());
  }
  std::vector<int64_t> dims = x.to_vector();
  dims.insert(dims.begin() + *axis, 1);
  return TensorShape(dims);
}

graph::Expected<TensorShape> squeeze_shape(const KernelContext& ctx, const TensorShape& x) {
  const auto& axes = ctx.attr<std::vector<int64_t>>("axis");
  std::vector<bool> dropped(static_cast<size_t>(x.rank()), axes.empty());
  if (axes.empty()) {
    for (int d = 0; d < x.rank(); ++d) dropped[static_cast<size_t>(d)] = x.dim(d) == 1;
  }
  for (int64_t a : axes) {
    const auto axis = normalize_axis(a, x.rank());
    if (!axis) return graph::invalid_argument("squeeze axis " + std::to_string(a) + " is outside " + x.to_string());
    if (x.dim(*axis) != 1) {
      return graph::invalid_argument("cannot squeeze dim " + std::to_string(*axis) + " of " + x.to_string() + ": it is not 1");
    }
    dropped[static_cast<size_t>(*axis)] = true;
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < x.rank(); ++d) {
    if (!dropped[static_cast<size_t>(d)]) dims.push_back(x.dim(d));
  }
  return TensorShape(dims);
}

namespace {

template <class T>
graph::Expected<int64_t> range_size_in(double start_value, double limit_value, double delta_value) {
  const auto bound = [](const char* what, double v) -> graph::Expected<T> {
    if constexpr (std::is_integral_v<T>) {
      if (!(std::trunc(v) == v && v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
            v <= static_cast<double>(std::numeric_limits<T>::max()))) {
        return graph::invalid_argument(std::string("Range's ") + what + " " + graph::attr_to_string(v) + " is not a " +
                                       std::string(graph::dtype_name(graph::dtype_of<T>())));
      }
    }
    return static_cast<T>(v);
  };
  MIRRA_ASSIGN_OR_RETURN(const T start, bound("start", start_value));
  MIRRA_ASSIGN_OR_RETURN(const T limit, bound("limit", limit_value));
  MIRRA_ASSIGN_OR_RETURN(const T delta, bound("delta", delta_value));
  const auto refused = [&](const std::string& why) {  // the message is built only for an error
    return graph::invalid_argument("Range from " + graph::attr_to_string(start_value) + " to " + graph::attr_to_string(limit_value) +
                                   " by " + graph::attr_to_string(delta_value) + ": " + why);
  };
  if (delta == T(0)) return refused("delta must not be 0");
  if (delta > T(0) ? start > limit : start < limit) return refused("delta points away from limit");
  double size = 0;
  if constexpr (std::is_integral_v<T>) {
    // In uint64: delta points from start to limit, so the distance and |delta| fit, and nothing overflows.
    const auto distance = delta > T(0) ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                       : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    const auto stride = delta > T(0) ? static_cast<uint64_t>(delta) : uint64_t(0) - static_cast<uint64_t>(delta);
    size = static_cast<double>(distance / stride + (distance % stride != 0));
  } else {
    size = std::ceil(std::abs(static_cast<double>((limit - start) / delta)));
  }
  if (!(size < 9.2e18)) return refused("too many elements");
  return static_cast<int64_t>(size);
}

}  // namespace

graph::Expected<int64_t> range_size(graph::DType dtype, double start, double limit, double delta) {
  switch (dtype) {
    case graph::DType::f32: return range_size_in<float>(start, limit, delta);
    case graph::DType::f64: return range_size_in<double>(start, limit, delta);
    case graph::DType::i32: return range_size_in<int32_t>(start, limit, delta);
    case graph::DType::i64: return range_size_in<int64_t>(start, limit, delta);
    default: return graph::invalid_argument("Range has no " + std::string(graph::dtype_name(dtype)) + " form");
  }
}

graph::Expected<std::vector<int>> sum_to_shape_axes(const Tensor& x, const Tensor& like) {
  const int offset = x.rank() - like.rank();
  std::vector<int> axes;
  bool fits = offset >= 0;
  for (int d = 0; fits && d < x.rank(); ++d) {
    if (d < offset || (like.dim(d - offset) == 1 && x.dim(d) != 1)) {
      axes.push_back(d);
    } else if (like.dim(d - offset) != x.dim(d)) {
      fits = false;
    }
  }
  if (!fits) return graph::invalid_argument(x.type_string() + " does not sum to the shape of " + like.type_string());
  return axes;
}

graph::Expected<ArgMaxGeometry> argmax_geometry(const KernelContext& ctx, const Tensor& x) {
  const int axis = *normalize_axis(ctx.attr<int64_t>("axis"), x.rank());
  ArgMaxGeometry g;
  g.n = x.dim(axis);
  std::vector<int64_t> dims;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) g.outer *= x.dim(d);
    if (d > axis) g.inner *= x.dim(d);
    if (d != axis) dims.push_back(x.dim(d));
  }
  if (g.n == 0 && g.outer * g.inner > 0) return graph::invalid_argument("argmax over an empty dim of " + x.type_string());
  g.output = TensorShape(dims);
  return g;
}

graph::Expected<BiasGeometry> bias_geometry(const KernelContext& ctx, const Tensor& x, const Tensor& bias) {
  const int axis = ctx.attr<std::string>("data_format") == "NCHW" ? 1 : x.rank() - 1;
  BiasGeometry g{.channels = x.dim(axis)};
  if (bias.dim(0) != g.channels) {
    return graph::invalid_argument("bias " + bias.type_string() + " does not match channel dim of " + x.type_string());
  }
  for (int d = axis + 1; d < x.rank(); ++d) g.inner *= x.dim(d);
  return g;
}

graph::Status check_conv_operands(const KernelContext& ctx, const Tensor& input, const Tensor& filter, const Tensor* bias,
                                  bool nchw, graph::DType output) {
  if (filter.dim(2) != input.dim(nchw ? 1 : 3)) {
    return graph::invalid_argument("filter " + filter.type_string() + " does not match input channels of " + input.type_string());
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != filter.dim(3))) {
    return graph::invalid_argument("bias " + bias->type_string() + " does not match the filter's " +
                                   std::to_string(filter.dim(3)) + " output channels");
  }
  if (bias != nullptr) {
    // Checked on the node's own input (a kernel may pass a widened copy as `bias`).
    const graph::DType given = ctx.input(2).dtype();
    if (given != graph::DType::f32 && given != output) {
      return graph::invalid_argument("bias " + ctx.input(2).type_string() + " must be f32 or " +
                                     std::string(graph::dtype_name(output)) + ", the output's dtype");
    }
  }
  return graph::Status();
}

graph::Status check_labels(const Tensor& logits, const Tensor& labels) {
  if (labels.dim(0) != logits.dim(0)) {
    return graph::invalid_argument("labels " + labels.type_string() + " do not match logits " + logits.type_string());
  }
  return graph::Status();
}

graph::Status check_update_operands(const KernelContext& ctx, size_t last) {
  const Tensor& variable = ctx.input(0);
  for (size_t i = 1; i <= last; ++i) {
    if (!(ctx.input(i).shape() == variable.shape())) {
      return graph::invalid_argument("operand " + std::to_string(i) + " " + ctx.input(i).type_string() +
                                     " does not match the variable " + variable.type_string());
    }
  }
  return graph::Status();
}

graph::Status check_assigned_parts(const KernelContext& ctx) {
  const Tensor& variable = ctx.input(0);
  int64_t elements = 0;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype() != variable.dtype()) {
      return graph::invalid_argument("value " + std::to_string(i) + " " + ctx.input(i).type_string() +
                                     " does not match the variable " + variable.type_string());
    }
    elements += ctx.input(i).num_elements();
  }
  if (ctx.num_inputs() == 2 && !(ctx.input(1).shape() == variable.shape())) {
    return graph::invalid_argument("operand 1 " + ctx.input(1).type_string() + " does not match the variable " +
                                   variable.type_string());
  }
  if (elements != variable.num_elements()) {
    return graph::invalid_argument("the values hold " + std::to_string(elements) + " elements, the variable " +
                                   variable.type_string() + " " + std::to_string(variable.num_elements()));
  }
  return graph::Status();
}

graph::Status check_sparse_update_operands(const KernelContext& ctx, size_t slots) {
  MIRRA_RETURN_IF_ERROR(check_update_operands(ctx, slots));
  const Tensor& variable = ctx.input(0);
  const Tensor& rows = ctx.input(slots + 1);
  const Tensor& indices = ctx.input(slots + 2);
  std::vector<int64_t> expected = indices.shape().to_vector();
  for (int d = 1; d < variable.shape().rank(); ++d) expected.push_back(variable.shape().dim(d));
  if (variable.shape().rank() < 1 || rows.shape().to_vector() != expected) {
    return graph::invalid_argument("rows " + rows.type_string() + " do not match indices " + indices.type_string() +
                                   " of the variable " + variable.type_string());
  }
  return graph::Status();
}

bool update_gated_off(const KernelContext& ctx, size_t gate) {
  return ctx.num_inputs() > gate && !ctx.input(gate).data<bool>()[0];
}

GatherGeometry gather_geometry(const TensorShape& params, const TensorShape& indices, int64_t axis) {
  const int a = *normalize_axis(axis, params.rank());
  GatherGeometry g;
  std::vector<int64_t> out;
  for (int d = 0; d < a; ++d) {
    g.outer *= params.dim(d);
    out.push_back(params.dim(d));
  }
  g.axis_size = params.dim(a);
  g.indices = indices.num_elements();
  for (int64_t dim : indices.to_vector()) out.push_back(dim);
  for (int d = a + 1; d < params.rank(); ++d) {
    g.inner *= params.dim(d);
    out.push_back(params.dim(d));
  }
  g.output = TensorShape(out);
  return g;
}

graph::Expected<SegmentGeometry> segment_geometry(const TensorShape& data, const TensorShape& ids, int64_t segments) {
  if (ids.rank() > data.rank()) {
    return graph::invalid_argument("segment_ids " + ids.to_string() + " has a higher rank than data " + data.to_string());
  }
  for (int d = 0; d < ids.rank(); ++d) {
    if (ids.dim(d) != data.dim(d)) {
      return graph::invalid_argument("segment_ids " + ids.to_string() + " is not a prefix of data's shape " + data.to_string());
    }
  }
  SegmentGeometry g;
  g.rows = ids.num_elements();
  std::vector<int64_t> out{segments};
  for (int d = ids.rank(); d < data.rank(); ++d) {
    g.inner *= data.dim(d);
    out.push_back(data.dim(d));
  }
  g.output = TensorShape(out);
  return g;
}

graph::Expected<BatchMatMulGeometry> batch_matmul_geometry(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  BatchMatMulGeometry g;
  g.adj_x = ctx.attr<bool>("adj_x");
  g.adj_y = ctx.attr<bool>("adj_y");
  const int xr = x.rank(), yr = y.rank();
  g.m = x.dim(xr - (g.adj_x ? 1 : 2));
  g.k = x.dim(xr - (g.adj_x ? 2 : 1));
  const int64_t ky = y.dim(yr - (g.adj_y ? 1 : 2));
  g.n = y.dim(yr - (g.adj_y ? 2 : 1));
  if (g.k != ky) return graph::invalid_argument("inner dimensions differ: " + x.type_string() + " x " + y.type_string());
  // The batch dims, aligned at the right; each operand's matrix strides over them (0 where broadcast).
  const int rank = std::max(xr, yr) - 2;
  std::vector<int64_t> dims(static_cast<size_t>(rank)), x_strides(dims.size()), y_strides(dims.size());
  int64_t x_stride = 1, y_stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int xd = d - (rank - (xr - 2)), yd = d - (rank - (yr - 2));
    const int64_t xs = xd >= 0 ? x.dim(xd) : 1, ys = yd >= 0 ? y.dim(yd) : 1;
    if (xs != ys && xs != 1 && ys != 1) {
      return graph::invalid_argument("batch dimensions of " + x.type_string() + " and " + y.type_string() + " do not broadcast");
    }
    dims[static_cast<size_t>(d)] = xs == 1 ? ys : xs;
    x_strides[static_cast<size_t>(d)] = xs == 1 ? 0 : x_stride;
    y_strides[static_cast<size_t>(d)] = ys == 1 ? 0 : y_stride;
    x_stride *= xs;
    y_stride *= ys;
    g.batch *= dims[static_cast<size_t>(d)];
  }
  g.x_batch.resize(static_cast<size_t>(g.batch));
  g.y_batch.resize(static_cast<size_t>(g.batch));
  for (int64_t i = 0; i < g.batch; ++i) {
    int64_t rest = i, xi = 0, yi = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % dims[static_cast<size_t>(d)];
      rest /= dims[static_cast<size_t>(d)];
      xi += c * x_strides[static_cast<size_t>(d)];
      yi += c * y_strides[static_cast<size_t>(d)];
    }
    g.x_batch[static_cast<size_t>(i)] = xi;
    g.y_batch[static_cast<size_t>(i)] = yi;
  }
  dims.push_back(g.m);
  dims.push_back(g.n);
  g.output = TensorShape(dims);
  return g;
}

graph::Expected<AttentionGeometry> attention_geometry(const KernelContext& ctx, size_t first, size_t mask) {
  const Tensor& q = ctx.input(first);
  const Tensor& k = ctx.input(first + 1);
  const Tensor& v = ctx.input(first + 2);
  AttentionGeometry g{.batch = q.dim(0), .heads = q.dim(1), .t = q.dim(2), .s = k.dim(2), .d = q.dim(3), .e = v.dim(3)};
  if (k.dim(0) != g.batch || v.dim(0) != g.batch || k.dim(1) != g.heads || v.dim(1) != g.heads || k.dim(3) != g.d ||
      v.dim(2) != g.s) {
    return graph::invalid_argument("q " + q.type_string() + ", k " + k.type_string() + " and v " + v.type_string() +
                                   " do not make an attention");
  }
  g.causal = ctx.attr<bool>("causal");
  const auto scale = ctx.node().attrs.get<double>("scale");
  g.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(g.d, 1)));
  if (ctx.num_inputs() > mask) {
    const Tensor& m = ctx.input(mask);
    const std::vector<int64_t> want = {g.batch, g.heads, g.t, g.s};
    std::vector<int64_t> dims = m.shape().to_vector();
    if (dims.size() == 2) dims.insert(dims.begin(), {1, 1});
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      const size_t i = static_cast<size_t>(d);
      if (dims[i] != want[i] && !(dims[i] == 1 && d < 2)) {
        return graph::invalid_argument("the mask " + m.type_string() + " does not broadcast to the scores [" + std::to_string(g.batch) +
                                       "," + std::to_string(g.heads) + "," + std::to_string(g.t) + "," + std::to_string(g.s) + "]");
      }
      g.mask_strides[d] = dims[i] == 1 && want[i] != 1 ? 0 : stride;
      stride *= dims[i];
    }
  }
  return g;
}

graph::Expected<int64_t> dropout_elements_per_example(const Tensor& x, const Tensor& keys) {
  const int64_t examples = keys.num_elements();
  if (examples == 0 ? x.dim(0) != 0 : x.dim(0) % examples != 0) {
    return graph::invalid_argument("x " + x.type_string() + " does not hold rows of the " + std::to_string(examples) +
                                   " examples of keys " + keys.type_string());
  }
  return examples == 0 ? int64_t{0} : x.num_elements() / examples;
}

graph::Expected<LayerNormGeometry> layer_norm_geometry(const KernelContext& ctx, bool gradient) {
  const Tensor& x = ctx.input(gradient ? 1 : 0);
  LayerNormGeometry g;
  g.columns = x.dim(x.rank() - 1);
  const std::vector<int64_t> dims = x.shape().to_vector();
  g.row_shape = TensorShape(std::vector<int64_t>(dims.begin(), dims.end() - 1));
  g.rows = g.row_shape.num_elements();
  if (gradient && !(ctx.input(0).shape() == x.shape())) {
    return graph::invalid_argument("dy " + ctx.input(0).type_string() + " does not match x " + x.type_string());
  }
  const std::vector<size_t> per_column = gradient ? std::vector<size_t>{2} : std::vector<size_t>{1, 2};
  for (const size_t i : per_column) {
    if (ctx.input(i).num_elements() != g.columns) {
      return graph::invalid_argument("a parameter " + ctx.input(i).type_string() + " does not match x's last dim in " + x.type_string());
    }
  }
  for (size_t i = 3; gradient && i < 5; ++i) {
    if (ctx.input(i).num_elements() != g.rows) {
      return graph::invalid_argument("a row statistic " + ctx.input(i).type_string() + " does not match the rows of " + x.type_string());
    }
  }
  return g;
}

}  // namespace mirra::ops
