// SplitBatch, AllReduce, Broadcast, AllGather and DimSize: schemas, builders and CPU kernels.
#include "ops/distribute_ops.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/parallel.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

constexpr int64_t kMaxReplicas = 4096;

// The `replicas` attr of SplitBatch and Broadcast, which make one output per replica.
Expected<int64_t> replicas_attr(const InferContext& ctx) {
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  if (replicas < 1 || replicas > kMaxReplicas) return ctx.error("replicas must be in [1, 4096]");
  return replicas;
}

// Outputs 0..count-1 of node `id` (none valid when the builder failed to add it).
std::vector<graph::ValueRef> outputs_of(graph::NodeId id, size_t count) {
  std::vector<graph::ValueRef> outputs(count);
  if (id == graph::kInvalidNode) return outputs;
  for (size_t i = 0; i < count; ++i) outputs[i] = {id, static_cast<uint16_t>(i)};
  return outputs;
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

// ---- AllReduce ----

// Each chunk of the bucket's elements is summed over the replicas in replica order by one thread and
// written to every replica's output, so all replicas receive the same bits and the result does not
// depend on the thread count. Where the executor allows, outputs reuse the input buffers: each chunk
// is then read once and written back while still in cache, 2 x replicas x size bytes of memory
// traffic, the bound the benchmark holds it against (fresh outputs would add a read for ownership).
Status all_reduce_kernel(KernelContext& ctx) {
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  const size_t k = ctx.num_inputs() / static_cast<size_t>(replicas);
  const bool mean = ctx.attr<std::string>("reduction") == "mean";
  struct Segment {
    size_t tensor;
    int64_t begin, end;  // elements of that tensor
  };
  // The bucket as fixed-size chunks over its tensors, so big and small tensors spread evenly.
  constexpr int64_t kChunk = 16384;
  std::vector<Segment> chunks;
  for (size_t j = 0; j < k; ++j) {
    const Tensor& first = ctx.input(j);
    for (int64_t r = 1; r < replicas; ++r) {
      const Tensor& other = ctx.input(static_cast<size_t>(r) * k + j);
      if (!(other.shape() == first.shape()) || other.dtype() != first.dtype()) {
        return graph::invalid_argument("replica " + std::to_string(r) + " holds " + other.type_string() +
                                       " where replica 0 holds " + first.type_string());
      }
    }
    for (int64_t r = 0; r < replicas; ++r) {
      const size_t i = static_cast<size_t>(r) * k + j;
      if (ctx.input_reusable(i)) {
        ctx.set_output(i, ctx.input(i));  // in place: the lines just read are written back, no extra fetch
      } else {
        ctx.allocate_output(i, first.dtype(), first.shape());
      }
    }
    for (int64_t begin = 0; begin < first.num_elements(); begin += kChunk) {
      chunks.push_back({j, begin, std::min(first.num_elements(), begin + kChunk)});
    }
  }
  Status status;
  cpu::parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const Segment& s = chunks[static_cast<size_t>(c)];
      const Status done = cpu::visit_dtype<float, double>(ctx.input(s.tensor).dtype(), [&]<class T>(cpu::Type<T>) {
        // Blocks small enough that the sum stays in L1 while every replica's slice streams through
        // once: read all inputs, write all outputs, one pass over memory.
        constexpr int64_t kBlock = 512;
        T sum[kBlock];
        const T n = static_cast<T>(replicas);
        for (int64_t first = s.begin; first < s.end; first += kBlock) {
          const int64_t count = std::min(kBlock, s.end - first);
          const T* in0 = ctx.input(s.tensor).data<T>() + first;
          for (int64_t i = 0; i < count; ++i) sum[i] = in0[i];
          for (int64_t r = 1; r < replicas; ++r) {
            const T* in = ctx.input(static_cast<size_t>(r) * k + s.tensor).data<T>() + first;
            for (int64_t i = 0; i < count; ++i) sum[i] += in[i];
          }
          if (mean) {
            for (int64_t i = 0; i < count; ++i) sum[i] /= n;
          }
          for (int64_t r = 0; r < replicas; ++r) {
            T* out = ctx.output(static_cast<size_t>(r) * k + s.tensor).mutable_data<T>() + first;
            std::copy(sum, sum + count, out);
          }
        }
        return Status();
      });
      if (!done.ok()) status = done;  // dtype errors are the same for every chunk of a tensor
    }
  });
  return status;
}

Expected<std::vector<TensorType>> infer_all_reduce(const InferContext& ctx) {
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  if (replicas < 1) return ctx.error("replicas must be positive");
  if (ctx.num_inputs() % static_cast<size_t>(replicas) != 0) {
    return ctx.error("the inputs do not divide into " + std::to_string(replicas) + " replicas");
  }
  const std::string& reduction = ctx.attr<std::string>("reduction");
  if (reduction != "sum" && reduction != "mean") return ctx.error("reduction must be sum or mean");
  const size_t k = ctx.num_inputs() / static_cast<size_t>(replicas);
  std::vector<TensorType> outputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    const TensorType& first = ctx.input(i % k);
    if (t.dtype != DType::f32 && t.dtype != DType::f64) return ctx.error("all-reduce takes f32 or f64");
    if (t.dtype != first.dtype || !t.shape.compatible_with(first.shape)) {
      return ctx.error("input " + std::to_string(i) + " " + t.to_string() + " does not match replica 0's " +
                       first.to_string());
    }
    outputs.push_back(t);
  }
  return outputs;
}

// ---- Broadcast and AllGather ----

// Every replica gets its own copy of the source's value (replica 0's, for a mirrored variable).
Status broadcast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  for (size_t r = 0; r < ctx.num_outputs(); ++r) {
    Tensor& copy = ctx.allocate_output(r, x.dtype(), x.shape());
    if (x.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), x.raw_data(), x.byte_size());
  }
  return Status();
}

// Every replica gets the concatenation, along dim 0, of all replicas' values in replica order.
Status all_gather_kernel(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  if (first.rank() == 0) return graph::invalid_argument("cannot gather scalars along dim 0");
  int64_t rows = 0;
  for (size_t r = 0; r < ctx.num_inputs(); ++r) {
    const Tensor& x = ctx.input(r);
    bool same = x.dtype() == first.dtype() && x.rank() == first.rank();
    for (int d = 1; same && d < x.rank(); ++d) same = x.dim(d) == first.dim(d);
    if (!same) {
      return graph::invalid_argument("replica " + std::to_string(r) + " holds " + x.type_string() +
                                     ", which does not stack with replica 0's " + first.type_string());
    }
    rows += x.dim(0);
  }
  runtime::TensorShape shape = first.shape();
  shape.set_dim(0, rows);
  Tensor& gathered = ctx.allocate_output(0, first.dtype(), shape);
  auto* out = static_cast<std::byte*>(gathered.mutable_raw_data());
  for (size_t r = 0; r < ctx.num_inputs(); ++r) {
    const Tensor& x = ctx.input(r);
    if (x.byte_size() > 0) std::memcpy(out, x.raw_data(), x.byte_size());
    out += x.byte_size();
  }
  for (size_t r = 1; r < ctx.num_outputs(); ++r) {
    Tensor& copy = ctx.allocate_output(r, gathered.dtype(), gathered.shape());
    if (gathered.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), gathered.raw_data(), gathered.byte_size());
  }
  return Status();
}

Expected<std::vector<TensorType>> infer_broadcast(const InferContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(const int64_t replicas, replicas_attr(ctx));
  return std::vector<TensorType>(static_cast<size_t>(replicas), ctx.input(0));
}

Expected<std::vector<TensorType>> infer_all_gather(const InferContext& ctx) {
  const TensorType& first = ctx.input(0);
  if (first.shape.rank() < 1) return ctx.error("cannot gather scalars along dim 0");
  int64_t rows = 0;
  for (size_t r = 0; r < ctx.num_inputs(); ++r) {
    const TensorType& t = ctx.input(r);
    bool same = t.dtype == first.dtype && t.shape.rank() == first.shape.rank();
    for (int d = 1; same && d < t.shape.rank(); ++d) {
      same = t.shape.dim(d) < 0 || first.shape.dim(d) < 0 || t.shape.dim(d) == first.shape.dim(d);
    }
    if (!same) return ctx.error("input " + std::to_string(r) + " " + t.to_string() + " does not stack with input 0");
    rows = rows < 0 || t.shape.dim(0) < 0 ? -1 : rows + t.shape.dim(0);
  }
  TensorType gathered = first;
  gathered.shape.dims[0] = rows;
  return std::vector<TensorType>(ctx.num_inputs(), gathered);
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

int64_t replica_share(int64_t batch, int64_t replicas, int64_t r) {
  return batch / replicas + (r < batch % replicas ? 1 : 0);
}

void register_distribute_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "SplitBatch",
                              .inputs = {"x"},
                              .attrs = {{"replicas", AttrType::integer, {}}},
                              .infer = infer_split_batch,
                              .summary = "Cuts dim 0 into one share per replica (sizes differ by at most one; the "
                                         "first B mod N shares are larger; a share may be empty), as views.",
                              .no_gradient = "it splits the host's input batch, which is never differentiated"});
  kernels.add("SplitBatch", graph::DeviceKind::cpu, {split_batch_kernel});
  schemas.add(graph::OpSchema{.name = "AllReduce",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = {{"replicas", AttrType::integer, {}}, {"reduction", AttrType::string, std::string("sum")}},
                              .traits = graph::kCollective,
                              .infer = infer_all_reduce,
                              .summary = "Sum (or mean) of each tensor of a bucket across replicas; every replica "
                                         "receives the same bits.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("AllReduce", graph::DeviceKind::cpu, {all_reduce_kernel, /*expensive=*/true, /*reuses_inputs=*/true});
  schemas.add(graph::OpSchema{.name = "Broadcast",
                              .inputs = {"x"},
                              .attrs = {{"replicas", AttrType::integer, {}}},
                              .traits = graph::kCollective,
                              .infer = infer_broadcast,
                              .summary = "A copy of x for every replica.",
                              .no_gradient = "it distributes state (initial values), which is not differentiated"});
  kernels.add("Broadcast", graph::DeviceKind::cpu, {broadcast_kernel, /*expensive=*/true});
  schemas.add(graph::OpSchema{.name = "AllGather",
                              .inputs = {"values"},
                              .variadic = true,
                              .traits = graph::kCollective,
                              .infer = infer_all_gather,
                              .summary = "Every replica receives all replicas' values stacked along dim 0, in "
                                         "replica order.",
                              .no_gradient = "it gathers results (metrics, predictions), which are not differentiated"});
  kernels.add("AllGather", graph::DeviceKind::cpu, {all_gather_kernel, /*expensive=*/true});
  schemas.add(graph::OpSchema{.name = "DimSize",
                              .inputs = {"x"},
                              .attrs = {{"axis", AttrType::integer, int64_t{0}}},
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

std::vector<graph::ValueRef> all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                        std::string_view reduction) {
  return outputs_of(
      b.add({.op = "AllReduce", .inputs = values, .attrs = {{"replicas", replicas}, {"reduction", std::string(reduction)}}}),
      values.size());
}

std::vector<graph::ValueRef> broadcast(graph::Builder& b, graph::ValueRef x, int64_t replicas) {
  return outputs_of(b.add({.op = "Broadcast", .inputs = {x}, .attrs = {{"replicas", replicas}}}), output_count(replicas));
}

std::vector<graph::ValueRef> all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& values) {
  return outputs_of(b.add({.op = "AllGather", .inputs = values}), values.size());
}

graph::ValueRef dim_size(graph::Builder& b, graph::ValueRef x, int64_t axis) {
  return b.add_value({.op = "DimSize", .inputs = {x}, .attrs = {{"axis", axis}}});
}

}  // namespace mirra::ops
