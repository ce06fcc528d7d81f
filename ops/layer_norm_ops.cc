// LayerNorm and LayerNormGrad: schemas, builders, the gradient rule and CPU kernels. A row's mean and
// variance are summed in double (the variance as the mean squared deviation from the mean: stable
// for a large mean); the column sums of the gradient (dscale, doffset) add the rows in order, in
// double, per column block: the same bits whatever the threads.
#include "ops/layer_norm_ops.h"

#include <cmath>
#include <string>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"
#include "runtime/vector_clones.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// The statistics' dtype: f64 for f64 x, else f32.
DType statistics_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

Status check_parameter(const InferContext& ctx, size_t input, int64_t columns, const char* what) {
  const TensorType& p = ctx.input(input);
  if (p.dtype != ctx.input(0).dtype) return ctx.error(std::string(what) + " must have x's dtype");
  if (p.shape.rank() != 1) return ctx.error(std::string(what) + " must have rank 1");
  if (columns >= 0 && p.shape.dim(0) >= 0 && p.shape.dim(0) != columns) {
    return ctx.error(std::string(what) + " must have x's last dim");
  }
  return Status();
}

Shape row_shape(const Shape& x) { return Shape{std::vector<int64_t>(x.dims.begin(), x.dims.end() - 1)}; }

Expected<std::vector<TensorType>> infer_layer_norm(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64}));
  const Shape& x = ctx.input(0).shape;
  if (x.rank() < 1) return ctx.error("x must have rank 1 or more");
  const int64_t columns = x.dim(x.rank() - 1);
  MIRRA_RETURN_IF_ERROR(check_parameter(ctx, 1, columns, "scale"));
  MIRRA_RETURN_IF_ERROR(check_parameter(ctx, 2, columns, "offset"));
  if (ctx.attr<double>("epsilon") < 0) return ctx.error("epsilon must be non-negative");
  const DType statistics = statistics_dtype(ctx.input(0).dtype);
  return std::vector<TensorType>{ctx.input(0), {statistics, row_shape(x)}, {statistics, row_shape(x)}};
}

// Inputs dy, x, scale, mean, rstd.
Expected<std::vector<TensorType>> infer_layer_norm_grad(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 1, {DType::f32, DType::f64}));
  const TensorType& x = ctx.input(1);
  if (ctx.input(0).dtype != x.dtype || ctx.input(0).shape.rank() != x.shape.rank()) return ctx.error("dy must have x's type");
  if (x.shape.rank() < 1) return ctx.error("x must have rank 1 or more");
  const int64_t columns = x.shape.dim(x.shape.rank() - 1);
  MIRRA_RETURN_IF_ERROR(check_parameter(ctx, 2, columns, "scale"));
  const DType statistics = statistics_dtype(x.dtype);
  for (size_t i : {size_t{3}, size_t{4}}) {
    if (ctx.input(i).dtype != statistics || ctx.input(i).shape.rank() != x.shape.rank() - 1) {
      return ctx.error("mean and rstd must be LayerNorm's outputs 1 and 2");
    }
  }
  const TensorType parameter{x.dtype, Shape{columns}};
  return std::vector<TensorType>{x, parameter, parameter};
}

// The sum of term(0) .. term(n - 1) in double, in eight interleaved partial sums (term c adds to sum
// c mod 8) combined pairwise in a fixed tree: an order fixed by n alone, so as deterministic as one
// running sum, and the eight sums fill a vector register.
template <class Term>
[[gnu::always_inline]] inline double interleaved_sum(int64_t n, const Term& term) {
  constexpr int kLanes = 8;
  double s[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    for (int k = 0; k < kLanes; ++k) s[k] += term(c + k);
  }
  for (; c < n; ++c) s[c % kLanes] += term(c);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// One row of LayerNorm: its mean and 1 / sqrt(variance + epsilon), then y.
template <class T>
[[gnu::always_inline]] inline void normalise_row(const T* x, const T* gamma, const T* beta, int64_t n, double epsilon,
                                                 T* y, T* mean, T* rstd) {
  const double mu = interleaved_sum(n, [&](int64_t c) { return static_cast<double>(x[c]); }) / static_cast<double>(n);
  const double squares = interleaved_sum(n, [&](int64_t c) {
    const double d = static_cast<double>(x[c]) - mu;
    return d * d;
  });
  const double inv = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);
  *mean = static_cast<T>(mu);
  *rstd = static_cast<T>(inv);
  for (int64_t c = 0; c < n; ++c) {
    y[c] = static_cast<T>((static_cast<double>(x[c]) - mu) * inv * static_cast<double>(gamma[c]) + static_cast<double>(beta[c]));
  }
}

// One row of dx = rstd * (dy * scale - mean(dy * scale) - xhat * mean(dy * scale * xhat)).
template <class T>
[[gnu::always_inline]] inline void row_gradient(const T* dy, const T* x, const T* gamma, int64_t n, double mu, double inv,
                                                T* dx) {
  const auto scaled = [&](int64_t c) { return static_cast<double>(dy[c]) * static_cast<double>(gamma[c]); };
  const double sum = interleaved_sum(n, scaled);
  const double dot = interleaved_sum(n, [&](int64_t c) { return scaled(c) * (static_cast<double>(x[c]) - mu) * inv; });
  const double mean_scaled = sum / static_cast<double>(n), mean_dot = dot / static_cast<double>(n);
  for (int64_t c = 0; c < n; ++c) {
    const double xhat = (static_cast<double>(x[c]) - mu) * inv;
    dx[c] = static_cast<T>(inv * (static_cast<double>(dy[c]) * static_cast<double>(gamma[c]) - mean_scaled - xhat * mean_dot));
  }
}

// Columns per task of the column sums.
inline constexpr int64_t kColumnBlock = 64;

// dscale and doffset over columns [first, last) (at most kColumnBlock): the sums of dy * xhat and of
// dy over all rows, in row order.
template <class T>
[[gnu::always_inline]] inline void column_sums(const T* dy, const T* x, const T* means, const T* rstds, int64_t rows,
                                               int64_t n, int64_t first, int64_t last, T* dscale, T* doffset) {
  double scale_sums[kColumnBlock] = {}, offset_sums[kColumnBlock] = {};
  const int64_t width = last - first;
  for (int64_t row = 0; row < rows; ++row) {
    const double mu = static_cast<double>(means[row]), inv = static_cast<double>(rstds[row]);
    const T* g = dy + row * n + first;
    const T* in = x + row * n + first;
    for (int64_t c = 0; c < width; ++c) {
      const double grad = static_cast<double>(g[c]);
      scale_sums[c] += grad * (static_cast<double>(in[c]) - mu) * inv;
      offset_sums[c] += grad;
    }
  }
  for (int64_t c = 0; c < width; ++c) {
    dscale[first + c] = static_cast<T>(scale_sums[c]);
    doffset[first + c] = static_cast<T>(offset_sums[c]);
  }
}

// The row and column loops, compiled per instruction set (runtime/vector_clones.h): in double they
// are bound by arithmetic, not memory.
MIRRA_VECTOR_CLONES void normalise_rows(const float* x, const float* gamma, const float* beta, int64_t n, double epsilon,
                                        int64_t begin, int64_t end, float* y, float* mean, float* rstd) {
  for (int64_t row = begin; row < end; ++row) normalise_row(x + row * n, gamma, beta, n, epsilon, y + row * n, mean + row, rstd + row);
}
MIRRA_VECTOR_CLONES void normalise_rows(const double* x, const double* gamma, const double* beta, int64_t n, double epsilon,
                                        int64_t begin, int64_t end, double* y, double* mean, double* rstd) {
  for (int64_t row = begin; row < end; ++row) normalise_row(x + row * n, gamma, beta, n, epsilon, y + row * n, mean + row, rstd + row);
}
MIRRA_VECTOR_CLONES void row_gradients(const float* dy, const float* x, const float* gamma, const float* means,
                                       const float* rstds, int64_t n, int64_t begin, int64_t end, float* dx) {
  for (int64_t row = begin; row < end; ++row) {
    row_gradient(dy + row * n, x + row * n, gamma, n, static_cast<double>(means[row]), static_cast<double>(rstds[row]), dx + row * n);
  }
}
MIRRA_VECTOR_CLONES void row_gradients(const double* dy, const double* x, const double* gamma, const double* means,
                                       const double* rstds, int64_t n, int64_t begin, int64_t end, double* dx) {
  for (int64_t row = begin; row < end; ++row) row_gradient(dy + row * n, x + row * n, gamma, n, means[row], rstds[row], dx + row * n);
}
MIRRA_VECTOR_CLONES void column_block_sums(const float* dy, const float* x, const float* means, const float* rstds,
                                           int64_t rows, int64_t n, int64_t first, int64_t last, float* dscale,
                                           float* doffset) {
  column_sums(dy, x, means, rstds, rows, n, first, last, dscale, doffset);
}
MIRRA_VECTOR_CLONES void column_block_sums(const double* dy, const double* x, const double* means, const double* rstds,
                                           int64_t rows, int64_t n, int64_t first, int64_t last, double* dscale,
                                           double* doffset) {
  column_sums(dy, x, means, rstds, rows, n, first, last, dscale, doffset);
}

Status layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  MIRRA_ASSIGN_OR_RETURN(const LayerNormGeometry r, layer_norm_geometry(ctx, /*gradient=*/false));
  const double epsilon = ctx.attr<double>("epsilon");
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& mean = ctx.allocate_output(1, statistics_dtype(x.dtype()), r.row_shape);
  Tensor& rstd = ctx.allocate_output(2, statistics_dtype(x.dtype()), r.row_shape);
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const int64_t n = r.columns;
    cpu::parallel_for(r.rows, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      normalise_rows(x.data<T>(), scale.data<T>(), offset.data<T>(), n, epsilon, begin, end, y.mutable_data<T>(),
                     mean.mutable_data<T>(), rstd.mutable_data<T>());
    });
    return Status();
  });
}

Status layer_norm_grad_kernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& scale = ctx.input(2);
  const Tensor& mean = ctx.input(3);
  const Tensor& rstd = ctx.input(4);
  MIRRA_ASSIGN_OR_RETURN(const LayerNormGeometry r, layer_norm_geometry(ctx, /*gradient=*/true));
  Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
  Tensor& dscale = ctx.allocate_output(1, x.dtype(), TensorShape{r.columns});
  Tensor& doffset = ctx.allocate_output(2, x.dtype(), TensorShape{r.columns});
  return cpu::visit_dtype<float, double>(x.dtype(), [&]<class T>(cpu::Type<T>) {
    const int64_t n = r.columns;
    cpu::parallel_for(r.rows, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
      row_gradients(dy.data<T>(), x.data<T>(), scale.data<T>(), mean.data<T>(), rstd.data<T>(), n, begin, end,
                    dx.mutable_data<T>());
    });
    const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
    cpu::parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const int64_t first = block * kColumnBlock;
        column_block_sums(dy.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(), r.rows, n, first,
                          std::min(n, first + kColumnBlock), dscale.mutable_data<T>(), doffset.mutable_data<T>());
      }
    });
    return Status();
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// y's gradient reaches x, scale and offset (the row statistics, outputs 1 and 2, are not
// differentiated, as batch normalisation's).
Grads layer_norm_grad(GradientContext& g) {
  Builder& b = g.builder;
  if (!g.grad(0).valid()) return Grads(3);
  const graph::NodeId id = b.add({.op = "LayerNormGrad",
                                  .inputs = {g.grad(0), g.input(0), g.input(1), g.output(1), g.output(2)},
                                  .attrs = {}});
  Grads grads(3);
  for (uint16_t i = 0; i < 3; ++i) {
    if (g.needs(i)) grads[i] = {id, i};
  }
  return grads;
}

}  // namespace

void register_layer_norm_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "LayerNorm",
      .inputs = {"x", "scale", "offset"},
      .attrs = {{"epsilon", AttrType::real, 1e-5}},
      .infer = infer_layer_norm,
      .summary = "Each row over the last dim normalised by its mean and biased variance, times scale plus offset; also "
                 "each row's mean and 1 / sqrt(variance + epsilon).",
      .gradient = layer_norm_grad});
  kernels.add("LayerNorm", graph::DeviceKind::cpu, {layer_norm_kernel});

  schemas.add(graph::OpSchema{
      .name = "LayerNormGrad",
      .inputs = {"dy", "x", "scale", "mean", "rstd"},
      .infer = infer_layer_norm_grad,
      .summary = "LayerNorm's gradient: dx, dscale, doffset from dy, x, scale and LayerNorm's row statistics.",
      .no_gradient = "second derivatives of LayerNorm are not supported"});
  kernels.add("LayerNormGrad", graph::DeviceKind::cpu, {layer_norm_grad_kernel});
}

ValueRef layer_norm(Builder& b, ValueRef x, ValueRef scale, ValueRef offset, double epsilon) {
  return b.add_value({.op = "LayerNorm", .inputs = {x, scale, offset}, .attrs = {{"epsilon", epsilon}}});
}

ValueRef layer_normalization(Builder& b, std::string_view name, ValueRef x, double epsilon) {
  if (!x.valid() || !b.status().ok()) return {};
  const graph::TensorType type = b.type(x);
  const int64_t columns = type.shape.rank() == 0 ? -1 : type.shape.dim(type.shape.rank() - 1);
  if (columns < 0) {
    b.fail(graph::invalid_argument("layer_normalization of " + type.to_string() + ": the last dim must be known"));
    return {};
  }
  auto scope = b.scope(name);
  const ValueRef gamma = variable(b, "gamma", {columns}, Initializer::ones(), type.dtype);
  const ValueRef beta = variable(b, "beta", {columns}, Initializer::zeros(), type.dtype);
  return layer_norm(b, x, gamma, beta, epsilon);
}

}  // namespace mirra::ops
