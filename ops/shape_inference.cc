// Shape-inference helpers.
#include "ops/shape_inference.h"

#include <algorithm>

namespace mirra::ops {

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  out.dims.assign(static_cast<size_t>(rank), 1);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    int64_t d;
    if (da == db) {
      d = da;
    } else if (da == 1) {
      d = db;
    } else if (db == 1) {
      d = da;
    } else if (da < 0) {
      d = db;
    } else if (db < 0) {
      d = da;
    } else {
      return std::nullopt;
    }
    out.dims[static_cast<size_t>(i)] = d;
  }
  return out;
}

std::optional<int> normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Status require_dtype_in(const InferContext& ctx, size_t input, const std::vector<graph::DType>& allowed) {
  const graph::DType dtype = ctx.input(input).dtype;
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) return Status();
  std::string names;
  for (graph::DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(graph::dtype_name(d));
  return ctx.error("input " + std::to_string(input) + " must have dtype in {" + names + "}");
}

Status require_same_dtype(const InferContext& ctx) {
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype != ctx.input(0).dtype) return ctx.error("inputs must have the same dtype");
  }
  return Status();
}

Status require_rank(const InferContext& ctx, size_t input, int rank) {
  if (ctx.input(input).shape.rank() == rank) return Status();
  return ctx.error("input " + std::to_string(input) + " must have rank " + std::to_string(rank));
}

Expected<graph::DType> product_output_dtype(const InferContext& ctx, size_t operands) {
  using graph::DType;
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::bf16, DType::f16}));
  for (size_t i = 1; i < operands; ++i) {
    if (ctx.input(i).dtype != ctx.input(0).dtype) return ctx.error("operands must have the same dtype");
  }
  const DType dtype = ctx.input(0).dtype;
  if (!ctx.attr<bool>("f32_output")) return dtype;
  if (dtype != DType::bf16 && dtype != DType::f16) return ctx.error("f32_output is for bf16 and f16 operands");
  return DType::f32;
}

int64_t window_output_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation, bool same_padding) {
  if (in < 0) return -1;
  if (same_padding) return (in + stride - 1) / stride;
  const int64_t effective = (window - 1) * dilation + 1;
  return in >= effective ? (in - effective) / stride + 1 : 0;
}

int64_t same_padding_before(int64_t in, int64_t out, int64_t window, int64_t stride, int64_t dilation) {
  const int64_t effective = (window - 1) * dilation + 1;
  const int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
  return total / 2;
}

WindowPadding WindowPadding::of(const graph::AttrMap& attrs) {
  const std::string* padding = attrs.get<std::string>("padding");
  WindowPadding p{.same = padding != nullptr && *padding == "SAME", .is_explicit = padding != nullptr && *padding == "EXPLICIT"};
  if (!p.is_explicit) return p;
  const auto& amounts = *attrs.get<std::vector<int64_t>>("explicit_paddings");
  const std::string* format = attrs.get<std::string>("data_format");
  const size_t h = format != nullptr && *format == "NCHW" ? 2 : 1;  // the height dim; the width's follows
  p.top = amounts[2 * h];
  p.bottom = amounts[2 * h + 1];
  p.left = amounts[2 * h + 2];
  p.right = amounts[2 * h + 3];
  return p;
}

int64_t WindowPadding::output_dim(int axis, int64_t in, int64_t window, int64_t stride, int64_t dilation) const {
  if (!is_explicit || in < 0) return window_output_dim(in, window, stride, dilation, same);
  return window_output_dim(in + (axis == 0 ? top + bottom : left + right), window, stride, dilation, false);
}

int64_t WindowPadding::before(int axis, int64_t in, int64_t out, int64_t window, int64_t stride, int64_t dilation) const {
  if (is_explicit) return axis == 0 ? top : left;
  return same ? same_padding_before(in, out, window, stride, dilation) : 0;
}

}  // namespace mirra::ops
