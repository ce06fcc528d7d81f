// GatherV2 and UnsortedSegmentSum: schemas, builders, gradients and CPU kernels.
#include "ops/gather_ops.h"

#include <cstring>
#include <string>

#include "ops/array_ops.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/elementwise_ops.h"
#include "ops/kernel_shapes.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "ops/source_ops.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;
using runtime::TensorShape;

namespace {

Expected<std::vector<TensorType>> infer_gather(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 1, {DType::i32, DType::i64}));
  if (ctx.attr<int64_t>("batch_dims") != 0) return ctx.error("batch_dims other than 0 is not supported");
  const Shape& params = ctx.input(0).shape;
  const std::optional<int> axis = normalize_axis(ctx.attr<int64_t>("axis"), params.rank());
  if (!axis) return ctx.error("axis " + std::to_string(ctx.attr<int64_t>("axis")) + " is out of range for params");
  Shape out;
  out.dims.assign(params.dims.begin(), params.dims.begin() + *axis);
  out.dims.insert(out.dims.end(), ctx.input(1).shape.dims.begin(), ctx.input(1).shape.dims.end());
  out.dims.insert(out.dims.end(), params.dims.begin() + *axis + 1, params.dims.end());
  if (out.rank() > runtime::kMaxRank) return ctx.error("the output's rank exceeds " + std::to_string(runtime::kMaxRank));
  return std::vector<TensorType>{{ctx.input(0).dtype, out}};
}

Expected<std::vector<TensorType>> infer_unsorted_segment_sum(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 0, {DType::f32, DType::f64, DType::i32, DType::i64}));
  MIRRA_RETURN_IF_ERROR(require_dtype_in(ctx, 1, {DType::i32, DType::i64}));
  const Shape& data = ctx.input(0).shape;
  const Shape& ids = ctx.input(1).shape;
  if (ids.rank() > data.rank()) return ctx.error("segment_ids' rank exceeds data's");
  for (int d = 0; d < ids.rank(); ++d) {
    if (ids.dim(d) >= 0 && data.dim(d) >= 0 && ids.dim(d) != data.dim(d)) {
      return ctx.error("segment_ids' shape is not a prefix of data's");
    }
  }
  const int64_t segments = ctx.attr<int64_t>("num_segments");
  if (segments < 0) return ctx.error("num_segments must be non-negative");
  Shape out{segments};
  out.dims.insert(out.dims.end(), data.dims.begin() + ids.rank(), data.dims.end());
  const TensorType type{ctx.input(0).dtype, out};
  if (!type.byte_size_at(1)) return ctx.error("num_segments makes the output " + type.to_string() + " overflow int64 bytes");
  return std::vector<TensorType>{type};
}

// The first index outside [0, limit) (for a gather) or at or above limit (for a segment sum, which
// drops negative ids), as an error; ok when there is none.
template <class I>
Status check_indices(const I* indices, int64_t n, int64_t limit, bool negative_allowed, const char* what) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(indices[i]);
    if (v >= limit || (v < 0 && !negative_allowed)) {
      return graph::invalid_argument(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(v) + " is not in [0, " +
                                     std::to_string(limit) + ")");
    }
  }
  return Status();
}

Status gather_kernel(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const GatherGeometry g = gather_geometry(params.shape(), indices.shape(), ctx.attr<int64_t>("axis"));
  Tensor& y = ctx.allocate_output(0, params.dtype(), g.output);
  const size_t row_bytes = static_cast<size_t>(g.inner) * graph::dtype_size(params.dtype());
  return cpu::visit_dtype<int32_t, int64_t>(indices.dtype(), [&]<class I>(cpu::Type<I>) {
    const I* index = indices.data<I>();
    MIRRA_RETURN_IF_ERROR(check_indices(index, g.indices, g.axis_size, false, "indices"));
    if (row_bytes == 0) return Status();
    const auto* from = static_cast<const char*>(params.raw_data());
    auto* to = static_cast<char*>(y.mutable_raw_data());
    const int64_t rows = g.outer * g.indices;
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(g.inner, 1)),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t r = begin; r < end; ++r) {
                          const int64_t o = r / g.indices, i = r % g.indices;
                          const int64_t source = o * g.axis_size + static_cast<int64_t>(index[i]);
                          std::memcpy(to + static_cast<size_t>(r) * row_bytes, from + static_cast<size_t>(source) * row_bytes,
                                      row_bytes);
                        }
                      });
    return Status();
  });
}

// Each segment's rows listed in their order in data (a counting sort), then the segments summed in
// parallel, each adding its rows in that order: the same sums whatever the threads.
Status unsorted_segment_sum_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ids = ctx.input(1);
  const int64_t segments = ctx.attr<int64_t>("num_segments");
  MIRRA_ASSIGN_OR_RETURN(const SegmentGeometry g, segment_geometry(data.shape(), ids.shape(), segments));
  Tensor& y = ctx.allocate_output(0, data.dtype(), g.output);
  return cpu::visit_dtype<int32_t, int64_t>(ids.dtype(), [&]<class I>(cpu::Type<I>) {
    const I* id = ids.data<I>();
    MIRRA_RETURN_IF_ERROR(check_indices(id, g.rows, segments, true, "segment_ids"));
    std::vector<int64_t> starts(static_cast<size_t>(segments) + 1, 0);
    for (int64_t r = 0; r < g.rows; ++r) {
      if (id[r] >= 0) ++starts[static_cast<size_t>(id[r]) + 1];
    }
    for (int64_t s = 0; s < segments; ++s) starts[static_cast<size_t>(s) + 1] += starts[static_cast<size_t>(s)];
    std::vector<int64_t> order(static_cast<size_t>(starts.back()));
    std::vector<int64_t> next(starts.begin(), starts.end() - 1);
    for (int64_t r = 0; r < g.rows; ++r) {
      if (id[r] >= 0) order[static_cast<size_t>(next[static_cast<size_t>(id[r])]++)] = r;
    }
    return cpu::visit_dtype<float, double, int32_t, int64_t>(data.dtype(), [&]<class T>(cpu::Type<T>) {
      const T* in = data.data<T>();
      T* out = y.mutable_data<T>();
      const int64_t inner = g.inner;
      cpu::parallel_for(segments, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(inner, 1)),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t s = begin; s < end; ++s) {
                            T* row = out + s * inner;
                            std::fill_n(row, inner, T(0));
                            for (int64_t k = starts[static_cast<size_t>(s)]; k < starts[static_cast<size_t>(s) + 1]; ++k) {
                              const T* source = in + order[static_cast<size_t>(k)] * inner;
                              for (int64_t c = 0; c < inner; ++c) row[c] += source[c];
                            }
                          }
                        });
      return Status();
    });
  });
}

using graph::GradientContext;
using Grads = std::vector<ValueRef>;

// The rows dy holds, added back into params' rows: a segment sum over the indices along axis 0; for
// another axis, dy's index dims are moved to the front first and the result's first dim back to axis.
Grads gather_grad(GradientContext& g) {
  Builder& b = g.builder;
  const Shape& params = g.input_types[0].shape;
  const int axis = *normalize_axis(g.attr<int64_t>("axis"), params.rank());
  if (params.dim(axis) < 0) {
    b.fail(graph::unimplemented("GatherV2's gradient needs params' dim " + std::to_string(axis) + " to be known"));
    return Grads(2);
  }
  const int index_rank = g.input_types[1].shape.rank();
  const int rank = params.rank() - 1 + index_rank;
  if (axis == 0) return {unsorted_segment_sum(b, g.grad(0), g.input(1), params.dim(0)), ValueRef{}};
  std::vector<int64_t> to_front, back;
  for (int d = axis; d < axis + index_rank; ++d) to_front.push_back(d);
  for (int d = 0; d < axis; ++d) to_front.push_back(d);
  for (int d = axis + index_rank; d < rank; ++d) to_front.push_back(d);
  for (int d = 1; d <= axis; ++d) back.push_back(d);
  back.push_back(0);
  for (int d = axis + 1; d < params.rank(); ++d) back.push_back(d);
  const ValueRef front = transpose(b, g.grad(0), to_front);
  const ValueRef summed = unsorted_segment_sum(b, front, g.input(1), params.dim(axis));
  return {transpose(b, summed, back), ValueRef{}};
}

// Each data row receives its segment's gradient row; rows of a negative id (dropped) receive zeros.
Grads unsorted_segment_sum_grad(GradientContext& g) {
  Builder& b = g.builder;
  const ValueRef ids = g.input(1);
  const Shape& id_shape = g.input_types[1].shape;
  const ValueRef zero = scalar_of(b, 0, ids);
  const ValueRef rows = gather(b, g.grad(0), maximum(b, ids, zero));
  std::vector<int64_t> mask_dims = id_shape.dims;
  mask_dims.resize(static_cast<size_t>(g.input_types[0].shape.rank()), 1);
  const ValueRef kept = cast(b, greater_equal(b, ids, zero), g.input_types[0].dtype);
  return {mul(b, rows, reshape(b, kept, mask_dims)), ValueRef{}};
}

}  // namespace

void register_gather_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "GatherV2",
      .inputs = {"params", "indices"},
      .attrs = {{"axis", AttrType::integer, int64_t{0}}, {"batch_dims", AttrType::integer, int64_t{0}}},
      .moves_values = {0},
      .infer = infer_gather,
      .summary = "params' slices along axis at the indices (an embedding lookup); an index out of range is an error.",
      .gradient = gather_grad});
  kernels.add("GatherV2", graph::DeviceKind::cpu, {gather_kernel});

  schemas.add(graph::OpSchema{
      .name = "UnsortedSegmentSum",
      .inputs = {"data", "segment_ids"},
      .attrs = {{"num_segments", AttrType::integer, {}}},
      .infer = infer_unsorted_segment_sum,
      .summary = "data's rows added into num_segments rows by id, in data's order (negative ids dropped).",
      .gradient = unsorted_segment_sum_grad});
  kernels.add("UnsortedSegmentSum", graph::DeviceKind::cpu, {unsorted_segment_sum_kernel});
}

ValueRef gather(Builder& b, ValueRef params, ValueRef indices, int64_t axis) {
  return b.add_value({.op = "GatherV2", .inputs = {params, indices}, .attrs = {{"axis", axis}}});
}

ValueRef unsorted_segment_sum(Builder& b, ValueRef data, ValueRef segment_ids, int64_t num_segments) {
  return b.add_value({.op = "UnsortedSegmentSum", .inputs = {data, segment_ids}, .attrs = {{"num_segments", num_segments}}});
}

}  // namespace mirra::ops
