// Reshape, ExpandDims, Squeeze, Transpose, Tile, Identity, Cast and OneHot: schemas, builders and CPU
// kernels.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/array_ops.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/element_copy.h"
#include "ops/cpu/float_conversion.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_math.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/reduce_ops.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

// ---- Reshape ----

// The target shape with its -1 resolved against `count` elements; nullopt when impossible.
std::optional<std::vector<int64_t>> resolve_reshape(const std::vector<int64_t>& target, int64_t count) {
  std::vector<int64_t> dims = target;
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      unknown = static_cast<int>(i);
    } else if (__builtin_mul_overflow(known, dims[i], &known)) {
      return std::nullopt;
    }
  }
  if (unknown >= 0) {
    if (known == 0 || count % known != 0) return std::nullopt;
    dims[static_cast<size_t>(unknown)] = count / known;
  } else if (known != count) {
    return std::nullopt;
  }
  return dims;
}

Status reshape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto dims = resolve_reshape(ctx.attr<std::vector<int64_t>>("shape"), x.num_elements());
  if (!dims || dims->size() > runtime::kMaxRank) {
    return graph::invalid_argument("cannot reshape " + x.type_string() + " to " +
                                   graph::attr_to_string(ctx.attr<std::vector<int64_t>>("shape")));
  }
  ctx.set_output(0, x.reshaped(TensorShape(*dims)));
  return Status();
}

Expected<std::vector<TensorType>> infer_reshape(const InferContext& ctx) {
  const auto& target = ctx.attr<std::vector<int64_t>>("shape");
  int unknown = 0;
  for (int64_t d : target) {
    if (d < -1) return ctx.error("shape dims must be -1 or non-negative");
    unknown += d == -1;
  }
  if (unknown > 1) return ctx.error("shape may hold at most one -1");
  if (target.size() > runtime::kMaxRank) return ctx.error("shape has too high a rank");
  if (const auto count = ctx.input(0).shape.num_elements()) {
    const auto dims = resolve_reshape(target, *count);
    if (!dims) return ctx.error("cannot reshape to " + graph::attr_to_string(target));
    return std::vector<TensorType>{{ctx.input(0).dtype, Shape(*dims)}};
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, Shape(target)}};
}

// ---- ExpandDims and Squeeze: reshapes that insert or remove dims of size 1 ----

template <graph::Expected<TensorShape> (*kShape)(const KernelContext&, const TensorShape&)>
Status reshaping_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape shape, kShape(ctx, x.shape()));
  ctx.set_output(0, x.reshaped(shape));
  return Status();
}

Expected<std::vector<TensorType>> infer_expand_dims(const InferContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), in.rank() + 1);
  if (!axis) return ctx.error("axis " + std::to_string(ctx.attr<int64_t>("axis")) + " is outside [-rank-1, rank]");
  if (in.rank() >= runtime::kMaxRank) return ctx.error("the output's rank exceeds " + std::to_string(runtime::kMaxRank));
  Shape out = in;
  out.dims.insert(out.dims.begin() + *axis, 1);
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

Expected<std::vector<TensorType>> infer_squeeze(const InferContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const auto& axes = ctx.attr<std::vector<int64_t>>("axis");
  std::vector<bool> dropped(static_cast<size_t>(in.rank()), false);
  if (axes.empty()) {
    for (int d = 0; d < in.rank(); ++d) {
      if (in.dim(d) < 0) return ctx.error("squeezing every dim of size 1 needs known dims; name the axes");
      dropped[static_cast<size_t>(d)] = in.dim(d) == 1;
    }
  }
  for (int64_t a : axes) {
    const auto axis = normalize_axis(a, in.rank());
    if (!axis) return ctx.error("axis " + std::to_string(a) + " is out of range");
    if (in.dim(*axis) > 1 || in.dim(*axis) == 0) return ctx.error("cannot squeeze dim " + std::to_string(*axis) + ": it is not 1");
    dropped[static_cast<size_t>(*axis)] = true;
  }
  Shape out;
  for (int d = 0; d < in.rank(); ++d) {
    if (!dropped[static_cast<size_t>(d)]) out.dims.push_back(in.dim(d));
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

// ---- Tile ----

Status tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  MIRRA_ASSIGN_OR_RETURN(const TensorShape shape, tile_shape(ctx, x.shape()));
  Tensor& y = ctx.allocate_output(0, x.dtype(), shape);
  if (shape.num_elements() == 0) return Status();
  // Rows of the output's last dim: each is x's matching row (every dim taken modulo x's) repeated.
  const int rank = x.rank();
  const int64_t in_inner = rank > 0 ? x.dim(rank - 1) : 1, out_inner = rank > 0 ? shape.dim(rank - 1) : 1;
  int64_t in_strides[runtime::kMaxRank] = {};
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= x.dim(d);
  }
  cpu::with_element_type(x.dtype(), [&]<class E>(std::type_identity<E>) {
    const E* in = static_cast<const E*>(x.raw_data());
    E* out = static_cast<E*>(y.mutable_raw_data());
    cpu::parallel_for(shape.num_elements() / out_inner, std::max<int64_t>(1, cpu::kElementwiseGrain / out_inner),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t row = begin; row < end; ++row) {
                          int64_t offset = 0, rest = row;
                          for (int d = rank - 2; d >= 0; --d) {
                            offset += (rest % shape.dim(d)) % x.dim(d) * in_strides[d];
                            rest /= shape.dim(d);
                          }
                          E* row_out = out + row * out_inner;
                          for (int64_t at = 0; at < out_inner; at += in_inner) std::copy_n(in + offset, in_inner, row_out + at);
                        }
                      });
  });
  return Status();
}

Expected<std::vector<TensorType>> infer_tile(const InferContext& ctx) {
  const Shape& in = ctx.input(0).shape;
  const auto& multiples = ctx.attr<std::vector<int64_t>>("multiples");
  if (static_cast<int>(multiples.size()) != in.rank()) return ctx.error("multiples must have one entry per dim of the input");
  Shape out = in;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t m = multiples[static_cast<size_t>(d)];
    if (m < 0) return ctx.error("multiples must be non-negative");
    int64_t dim = -1;
    if (m == 0) {
      dim = 0;
    } else if (in.dim(d) >= 0 && __builtin_mul_overflow(in.dim(d), m, &dim)) {
      return ctx.error("the tiled dim " + std::to_string(d) + " overflows int64");
    }
    out.dims[static_cast<size_t>(d)] = dim;
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

// ---- Transpose ----

Status transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& perm = ctx.attr<std::vector<int64_t>>("perm");
  const int rank = x.rank();
  TensorShape out_shape = x.shape();
  int64_t in_strides[runtime::kMaxRank];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= x.dim(d);
  }
  int64_t strides[runtime::kMaxRank];  // input stride of each output dim
  for (int d = 0; d < rank; ++d) {
    out_shape.set_dim(d, x.dim(static_cast<int>(perm[static_cast<size_t>(d)])));
    strides[d] = in_strides[perm[static_cast<size_t>(d)]];
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
  if (y.num_elements() == 0) return Status();
  const int64_t inner = rank > 0 ? out_shape.dim(rank - 1) : 1;
  const int64_t inner_stride = rank > 0 ? strides[rank - 1] : 1;
  const int64_t rows = y.num_elements() / inner;
  cpu::with_element_type(x.dtype(), [&]<class E>(std::type_identity<E>) {
    const E* in = static_cast<const E*>(x.raw_data());
    E* out = static_cast<E*>(y.mutable_raw_data());
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kElementwiseGrain / inner), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = 0, rest = row;
        for (int d = rank - 2; d >= 0; --d) {
          offset += (rest % out_shape.dim(d)) * strides[d];
          rest /= out_shape.dim(d);
        }
        for (int64_t i = 0; i < inner; ++i) out[row * inner + i] = in[offset + i * inner_stride];
      }
    });
  });
  return Status();
}

Expected<std::vector<TensorType>> infer_transpose(const InferContext& ctx) {
  const auto& perm = ctx.attr<std::vector<int64_t>>("perm");
  const Shape& in = ctx.input(0).shape;
  if (static_cast<int>(perm.size()) != in.rank()) return ctx.error("perm must have one entry per dim");
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.rank() || seen[static_cast<size_t>(p)]) return ctx.error("perm must be a permutation of the dims");
    seen[static_cast<size_t>(p)] = true;
    out.dims.push_back(in.dim(static_cast<int>(p)));
  }
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

// ---- Identity ----

Status identity_kernel(KernelContext& ctx) {
  ctx.set_output(0, ctx.input(0));
  return Status();
}

// ---- Cast ----

template <class T>
constexpr bool kSixteenBitFloat = std::is_same_v<T, graph::bfloat16> || std::is_same_v<T, graph::float16>;

// One element; the 16-bit floats go through float (exact from them, rounded once to them, except
// from f64, which rounds to float first).
template <class To, class From>
To cast_element(From value) {
  if constexpr (kSixteenBitFloat<From>) {
    return cast_element<To>(static_cast<float>(value));
  } else if constexpr (kSixteenBitFloat<To>) {
    return To(math::convert<float>(value));
  } else {
    return math::convert<To>(value);
  }
}

Status cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, ctx.attr<graph::DType>("dtype"), x.shape());
  using graph::bfloat16, graph::float16;
  return cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(
      x.dtype(), [&]<class From>(cpu::Type<From>) {
    return cpu::visit_dtype<float, double, int32_t, int64_t, uint8_t, bool, bfloat16, float16>(
        y.dtype(), [&]<class To>(cpu::Type<To>) {
      const From* in = x.data<From>();
      To* out = y.mutable_data<To>();
      if constexpr ((std::is_same_v<From, float> && kSixteenBitFloat<To>) ||
                    (kSixteenBitFloat<From> && std::is_same_v<To, float>)) {
        cpu::convert_floats(in, out, x.num_elements());  // mixed precision's casts, vectorised
      } else {
        cpu::parallel_for(x.num_elements(), cpu::kElementwiseGrain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) out[i] = cast_element<To>(in[i]);
        });
      }
      return Status();
    });
  });
}

// ---- OneHot ----

Status one_hot_kernel(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const int64_t depth = ctx.attr<int64_t>("depth");
  std::vector<int64_t> dims = indices.shape().to_vector();
  dims.push_back(depth);
  if (dims.size() > runtime::kMaxRank) return graph::invalid_argument("one-hot output rank is too high");
  Tensor& y = ctx.allocate_output(0, ctx.attr<graph::DType>("dtype"), TensorShape(dims));
  const double on = ctx.attr<double>("on_value");
  const double off = ctx.attr<double>("off_value");
  return cpu::visit_dtype<int32_t, int64_t>(indices.dtype(), [&]<class I>(cpu::Type<I>) {
    return cpu::visit_dtype<float, double>(y.dtype(), [&]<class T>(cpu::Type<T>) {
      const I* in = indices.data<I>();
      T* out = y.mutable_data<T>();
      for (int64_t i = 0; i < indices.num_elements(); ++i) {
        for (int64_t c = 0; c < depth; ++c) out[i * depth + c] = static_cast<T>(in[i] == c ? on : off);
      }
      return Status();
    });
  });
}

// ---- ZerosLike and ReshapeLike (for gradients) ----

Status zeros_like_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  if (y.byte_size() > 0) std::memset(y.mutable_raw_data(), 0, y.byte_size());  // all-zero bytes are 0 in every dtype
  return Status();
}

Status reshape_like_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& like = ctx.input(1);
  if (x.num_elements() != like.num_elements()) {
    return graph::invalid_argument("cannot reshape " + x.type_string() + " to the shape of " + like.type_string());
  }
  ctx.set_output(0, x.reshaped(like.shape()));
  return Status();
}

// ---- gradients ----

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

Grads reshape_grad(GradientContext& g) { return {reshape_like(g.builder, g.grad(0), g.input(0))}; }

Grads transpose_grad(GradientContext& g) {
  const auto& perm = g.attr<std::vector<int64_t>>("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {transpose(g.builder, g.grad(0), inverse)};
}

Grads identity_grad(GradientContext& g) { return {g.grad(0)}; }

// The sum of dy's tiles: dy seen as [m0, d0, m1, d1, ...] (x's dims d, the multiples m; a pair only
// where m > 1, a 1 of x's dropped there), summed over the m axes, in x's shape.
Grads tile_grad(GradientContext& g) {
  auto& b = g.builder;
  const Shape& in = g.input_types[0].shape;
  if (!graph::is_floating(g.input_types[0].dtype)) return {ValueRef{}};
  const auto& multiples = g.attr<std::vector<int64_t>>("multiples");
  std::vector<int64_t> dims, tile_axes;
  int unknown = 0;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t m = multiples[static_cast<size_t>(d)];
    if (m != 1) {
      tile_axes.push_back(static_cast<int64_t>(dims.size()));
      dims.push_back(m);
    }
    if (m == 1 || in.dim(d) != 1) dims.push_back(in.dim(d));
    unknown += in.dim(d) < 0;
  }
  if (unknown > 1 || dims.size() > static_cast<size_t>(runtime::kMaxRank)) {
    b.fail(graph::unimplemented("node '" + g.node.name + "': the gradient of Tile needs at most one unknown dim and at most " +
                                std::to_string(runtime::kMaxRank) + " dims and tiled dims together"));
    return {};
  }
  const ValueRef tiles = reshape(b, g.grad(0), dims);
  const ValueRef summed = reduce_sum(b, tiles, tile_axes);
  return {reshape_like(b, summed, g.input(0))};
}

Grads cast_grad(GradientContext& g) {
  // Only a cast between floating types passes a gradient; integer outputs have none.
  const graph::DType from = g.input_types[0].dtype;
  if (!graph::is_floating(from) || !graph::is_floating(g.attr<graph::DType>("dtype"))) return {ValueRef{}};
  return {cast(g.builder, g.grad(0), from)};
}

Grads reshape_like_grad(GradientContext& g) { return {reshape_like(g.builder, g.grad(0), g.input(0)), ValueRef{}}; }

Grads zeros_like_grad(GradientContext&) { return {ValueRef{}}; }  // constant in x

}  // namespace

void register_array_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  using graph::DeviceKind;
  schemas.add(graph::OpSchema{.name = "Reshape",
                              .inputs = {"x"},
                              .attrs = {{"shape", AttrType::int_list, {}}},
                              .traits = graph::kForwardsInput,
                              .moves_values = {0},
                              .infer = infer_reshape,
                              .cost = graph::costs_nothing,
                              .summary = "The same elements with another shape; one dim may be -1.",
                              .gradient = reshape_grad});
  kernels.add("Reshape", DeviceKind::cpu, {reshape_kernel});

  schemas.add(graph::OpSchema{.name = "ExpandDims",
                              .inputs = {"x"},
                              .attrs = {{"axis", AttrType::integer, {}}},
                              .traits = graph::kForwardsInput,
                              .moves_values = {0},
                              .infer = infer_expand_dims,
                              .cost = graph::costs_nothing,
                              .summary = "x with a dim of size 1 inserted at axis (in [-rank-1, rank]); shares the buffer.",
                              .gradient = reshape_grad});
  kernels.add("ExpandDims", DeviceKind::cpu, {reshaping_kernel<expand_dims_shape>});
  schemas.add(graph::OpSchema{.name = "Squeeze",
                              .inputs = {"x"},
                              .attrs = {{"axis", AttrType::int_list, std::vector<int64_t>{}}},
                              .traits = graph::kForwardsInput,
                              .moves_values = {0},
                              .infer = infer_squeeze,
                              .cost = graph::costs_nothing,
                              .summary = "x without the dims of size 1 at axis (every one when axis is empty); shares the buffer.",
                              .gradient = reshape_grad});
  kernels.add("Squeeze", DeviceKind::cpu, {reshaping_kernel<squeeze_shape>});

  schemas.add(graph::OpSchema{.name = "Tile",
                              .inputs = {"x"},
                              .attrs = {{"multiples", AttrType::int_list, {}}},
                              .moves_values = {0},
                              .infer = infer_tile,
                              .summary = "x repeated multiples[d] times along each dim d.",
                              .gradient = tile_grad});
  kernels.add("Tile", DeviceKind::cpu, {tile_kernel});

  schemas.add(graph::OpSchema{.name = "Transpose",
                              .inputs = {"x"},
                              .attrs = {{"perm", AttrType::int_list, {}}},
                              .moves_values = {0},
                              .infer = infer_transpose,
                              .summary = "Permutes the dims: output dim i is input dim perm[i].",
                              .gradient = transpose_grad});
  kernels.add("Transpose", DeviceKind::cpu, {transpose_kernel});

  schemas.add(graph::OpSchema{.name = "Identity",
                              .inputs = {"x"},
                              .traits = graph::kForwardsInput,
                              .moves_values = {0},
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                return std::vector<TensorType>{ctx.input(0)};
                              },
                              .cost = graph::costs_nothing,
                              .summary = "Its input, unchanged (the buffer is shared).",
                              .gradient = identity_grad});
  kernels.add("Identity", DeviceKind::cpu, {identity_kernel});

  schemas.add(graph::OpSchema{.name = "Cast",
                              .inputs = {"x"},
                              .attrs = {{"dtype", AttrType::dtype, {}}},
                                                      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                return std::vector<TensorType>{{ctx.attr<graph::DType>("dtype"), ctx.input(0).shape}};
                              },
                              .summary = "Converts each element to dtype (float to int saturates; NaN to 0; to bf16 and f16 "
                                         "rounds to nearest, ties to even).",
                              .gradient = cast_grad});
  kernels.add("Cast", DeviceKind::cpu, {cast_kernel});

  schemas.add(graph::OpSchema{
      .name = "OneHot",
      .inputs = {"indices"},
      .attrs = {{"depth", AttrType::integer, {}},
                {"on_value", AttrType::real, 1.0},
                {"off_value", AttrType::real, 0.0},
                {"dtype", AttrType::dtype, graph::DType::f32}},
      .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
        MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {graph::DType::i32, graph::DType::i64}));
        const graph::DType dtype = ctx.attr<graph::DType>("dtype");
        if (dtype != graph::DType::f32 && dtype != graph::DType::f64) return ctx.error("dtype must be f32 or f64");
        const int64_t depth = ctx.attr<int64_t>("depth");
        if (depth < 0) return ctx.error("depth must be non-negative");
        Shape out = ctx.input(0).shape;
        out.dims.push_back(depth);
        if (out.rank() > runtime::kMaxRank) return ctx.error("the output's rank exceeds " + std::to_string(runtime::kMaxRank));
        const TensorType type{ctx.attr<graph::DType>("dtype"), out};
        if (!type.byte_size_at(1)) return ctx.error("depth " + std::to_string(depth) + " makes the output " + type.to_string() + " overflow int64 bytes");
        return std::vector<TensorType>{type};
      },
      .summary = "on_value at each index along a new last dim of size depth, off_value elsewhere.",
      .no_gradient = "its input holds integer indices"});
  kernels.add("OneHot", DeviceKind::cpu, {one_hot_kernel});

  schemas.add(graph::OpSchema{.name = "ZerosLike",
                              .inputs = {"x"},
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                return std::vector<TensorType>{ctx.input(0)};
                              },
                              .summary = "Zeros of x's dtype and run-time shape.",
                              .gradient = zeros_like_grad});
  kernels.add("ZerosLike", DeviceKind::cpu, {zeros_like_kernel});

  schemas.add(graph::OpSchema{.name = "ReshapeLike",
                              .inputs = {"x", "like"},
                              .traits = graph::kForwardsInput,
                              .moves_values = {0},
                              .reads_only_shape = {1},
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                const auto x = ctx.input(0).shape.num_elements();
                                const auto like = ctx.input(1).shape.num_elements();
                                if (x && like && *x != *like) return ctx.error("x and like differ in element count");
                                return std::vector<TensorType>{{ctx.input(0).dtype, ctx.input(1).shape}};
                              },
                              .summary = "x's elements in like's run-time shape (the gradient of Reshape).",
                              .gradient = reshape_like_grad});
  kernels.add("ReshapeLike", DeviceKind::cpu, {reshape_like_kernel});
}

ValueRef expand_dims(Builder& b, ValueRef x, int64_t axis) {
  return b.add_value({.op = "ExpandDims", .inputs = {x}, .attrs = {{"axis", axis}}});
}

ValueRef squeeze(Builder& b, ValueRef x, std::vector<int64_t> axes) {
  return b.add_value({.op = "Squeeze", .inputs = {x}, .attrs = {{"axis", std::move(axes)}}});
}

ValueRef tile(Builder& b, ValueRef x, std::vector<int64_t> multiples) {
  return b.add_value({.op = "Tile", .inputs = {x}, .attrs = {{"multiples", std::move(multiples)}}});
}

ValueRef reshape(Builder& b, ValueRef x, std::vector<int64_t> shape) {
  return b.add_value({.op = "Reshape", .inputs = {x}, .attrs = {{"shape", std::move(shape)}}});
}
ValueRef transpose(Builder& b, ValueRef x, std::vector<int64_t> perm) {
  return b.add_value({.op = "Transpose", .inputs = {x}, .attrs = {{"perm", std::move(perm)}}});
}
ValueRef zeros_like(Builder& b, ValueRef x) { return b.add_value({.op = "ZerosLike", .inputs = {x}}); }
ValueRef reshape_like(Builder& b, ValueRef x, ValueRef like) {
  return b.add_value({.op = "ReshapeLike", .inputs = {x, like}});
}
ValueRef identity(Builder& b, ValueRef x) { return b.add_value({.op = "Identity", .inputs = {x}}); }
ValueRef cast(Builder& b, ValueRef x, DType dtype) {
  return b.add_value({.op = "Cast", .inputs = {x}, .attrs = {{"dtype", dtype}}});
}
ValueRef one_hot(Builder& b, ValueRef indices, int64_t depth, double on_value, double off_value, DType dtype) {
  return b.add_value({.op = "OneHot",
                      .inputs = {indices},
                      .attrs = {{"depth", depth}, {"on_value", on_value}, {"off_value", off_value}, {"dtype", dtype}}});
}

}  // namespace mirra::ops
