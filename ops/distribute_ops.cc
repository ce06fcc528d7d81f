// SplitBatch and DimSize: schemas, builders and CPU kernels.
#include "ops/distribute_ops.h"

#include <algorithm>

#include "ops/collective_attrs.h"
#include "ops/op_families.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

// The `replicas` attr of SplitBatch, which makes one output per replica.
Expected<int64_t> replicas_attr(const InferContext& ctx) {
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  if (replicas < 1 || replicas > kMaxReplicas) return ctx.error("replicas must be in [1, 4096]");
  return replicas;
}

size_t output_count(int64_t replicas) { return static_cast<size_t>(std::clamp<int64_t>(replicas, 0, kMaxReplicas)); }

// ---- SplitBatch ----

Status split_batch_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) return graph::invalid_argument("cannot split a scalar into a batch");
  const int64_t replicas = static_cast<int64_t>(ctx.num_outputs());
  int64_t first = 0;
  for (int64_t r = 0; r < replicas; ++r) {
    const int64_t share = replica_share(x.dim(0), replicas, r);
    ctx.set_output(static_cast<size_t>(r), x.rows(first, share));
    first += share;
  }
  return Status();
}

Expected<std::vector<TensorType>> infer_split_batch(const InferContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const int64_t replicas, replicas_attr(ctx));
  if (ctx.input(0).shape.rank() < 1) return ctx.error("cannot split a scalar into a batch");
  std::vector<TensorType> shares;
  for (int64_t r = 0; r < replicas; ++r) {
    TensorType share = ctx.input(0);
    const int64_t batch = share.shape.dim(0);
    share.shape.dims[0] = batch < 0 ? -1 : replica_share(batch, replicas, r);
    shares.push_back(share);
  }
  return shares;
}

// ---- DimSize ----

Status dim_size_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto axis = normalize_axis(ctx.attr<int64_t>("axis"), x.rank());
  if (!axis) return graph::invalid_argument("axis is out of range for " + x.type_string());
  ctx.allocate_output(0, DType::i64, {}).mutable_data<int64_t>()[0] = x.dim(*axis);
  return Status();
}

}  // namespace

int64_t replica_share(int64_t batch, int64_t replicas, int64_t r) { return runtime::participant_share(batch, replicas, r); }

void register_distribute_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "SplitBatch",
                              .inputs = {"x"},
                              .attrs = {{"replicas", AttrType::integer, {}}},
                              .traits = graph::kForwardsInput,
                              .infer = infer_split_batch,
                              .summary = "Cuts dim 0 into one share per replica (sizes differ by at most one; the "
                                         "first B mod N shares are larger; a share may be empty), as views.",
                              .no_gradient = "it splits the host's input batch, which is never differentiated"});
  kernels.add("SplitBatch", graph::DeviceKind::cpu, {split_batch_kernel});
  schemas.add(graph::OpSchema{.name = "DimSize",
                              .inputs = {"x"},
                              .attrs = {{"axis", AttrType::integer, int64_t{0}}},
                              .reads_only_shape = {0},
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                if (!normalize_axis(ctx.attr<int64_t>("axis"), ctx.input(0).shape.rank())) {
                                  return ctx.error("axis is out of range");
                                }
                                return std::vector<TensorType>{{DType::i64, graph::Shape{}}};
                              },
                              .summary = "Dim `axis` of x as an i64 scalar.",
                              .no_gradient = "it outputs an integer"});
  kernels.add("DimSize", graph::DeviceKind::cpu, {dim_size_kernel});
}

std::vector<graph::ValueRef> split_batch(graph::Builder& b, graph::ValueRef x, int64_t replicas) {
  return outputs_of(b.add({.op = "SplitBatch", .inputs = {x}, .attrs = {{"replicas", replicas}}}), output_count(replicas));
}

graph::ValueRef dim_size(graph::Builder& b, graph::ValueRef x, int64_t axis) {
  return b.add_value({.op = "DimSize", .inputs = {x}, .attrs = {{"axis", axis}}});
}

}  // namespace mirra::ops
