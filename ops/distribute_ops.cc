// SplitBatch, AllReduce, ReduceScatter, Broadcast, AllGather and DimSize: schemas, builders and CPU
// kernels (the collectives' kernels call the session's Communicator once per replica, asynchronously).
#include "ops/distribute_ops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "ops/collective_attrs.h"
#include "ops/op_families.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

// ReduceScatter and AllGather may span worker processes: `workers` of them, this graph being worker
// `worker`'s part. The shares (or rows) each replica holds then depend on both (runtime::worker_share).
const graph::AttrSpec kWorkersAttr{"workers", AttrType::integer, int64_t{1}};
const graph::AttrSpec kWorkerAttr{"worker", AttrType::integer, int64_t{0}};

Expected<WorkerPart> worker_part_of(const InferContext& ctx) {
  const WorkerPart place{ctx.attr<int64_t>("worker"), ctx.attr<int64_t>("workers")};
  if (place.workers < 1 || place.workers > kMaxReplicas) return ctx.error("workers must be in [1, 4096]");
  if (place.worker < 0 || place.worker >= place.workers) return ctx.error("worker must be in [0, workers)");
  return place;
}

// The `replicas` attr of SplitBatch and Broadcast, which make one output per replica.
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

// ---- The collectives: one node calls the session's Communicator once per replica ----

// The node's calls of a collective, one per replica, joined: the tensors each call reads and writes
// live here until the last call finishes, which completes the node with the first error.
class ReplicaCalls {
 public:
  ReplicaCalls(int64_t replicas, runtime::KernelDone done)
      : inputs(static_cast<size_t>(replicas)), outputs(static_cast<size_t>(replicas)), remaining_(replicas),
        done_(std::move(done)) {}

  std::vector<std::vector<Tensor>> inputs, outputs;  // by replica

  // What replica r's call reports to.
  static runtime::CollectiveDone replica_done(const std::shared_ptr<ReplicaCalls>& calls) {
    return [calls](Status status) { calls->finish(std::move(status)); };
  }

 private:
  void finish(Status status) {
    if (!status.ok()) {
      std::lock_guard lock(mutex_);
      if (error_.ok()) error_ = std::move(status);
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_(error_);
  }

  std::atomic<int64_t> remaining_;
  std::mutex mutex_;
  Status error_;
  runtime::KernelDone done_;
};

// Replica r's part in this step's execution of the node's collective.
runtime::CollectiveCall replica_call(const KernelContext& ctx, int64_t r, int64_t replicas) {
  return {.group = ctx.node().name,
          .instance = ctx.collective_instance(),
          .participant = static_cast<int>(r),
          .group_size = static_cast<int>(replicas),
          .deadline = runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms")))};
}

// The node's collective, which must span the workers its attrs say this graph is part of.
graph::Expected<runtime::Communicator*> spanning_communicator(const KernelContext& ctx) {
  MIRRA_ASSIGN_OR_RETURN(runtime::Communicator* collective, node_communicator(ctx));
  const int64_t workers = ctx.attr<int64_t>("workers"), worker = ctx.attr<int64_t>("worker");
  if (collective->world_size() != workers || collective->rank() != worker) {
    return graph::failed_precondition("'" + ctx.node().name + "' is worker " + std::to_string(worker) + "'s part of " +
                                      std::to_string(workers) + " workers, but its collective '" +
                                      std::string(collective->name()) + "' is worker " + std::to_string(collective->rank()) +
                                      " of " + std::to_string(collective->world_size()));
  }
  return collective;
}

// Input i has the dtype and a shape compatible with replica 0's counterpart, input `reference`.
Status check_matches_replica_0(const InferContext& ctx, size_t i, size_t reference) {
  const TensorType& t = ctx.input(i);
  const TensorType& first = ctx.input(reference);
  if (t.dtype == first.dtype && t.shape.compatible_with(first.shape)) return Status();
  return ctx.error("input " + std::to_string(i) + " " + t.to_string() + " does not match replica 0's " + first.to_string());
}

// ---- AllReduce ----

// The `replicas` attr of AllReduce, ReduceScatter and AllGather, whose inputs hold a bucket of k
// tensors per replica (replica r's j-th is input r * k + j), and k.
Expected<std::pair<int64_t, size_t>> bucket_of(const InferContext& ctx) {
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  if (replicas < 1 || replicas > kMaxReplicas) return ctx.error("replicas must be in [1, 4096]");
  if (ctx.num_inputs() % static_cast<size_t>(replicas) != 0) {
    return ctx.error("the inputs do not divide into " + std::to_string(replicas) + " replicas");
  }
  return std::pair{replicas, ctx.num_inputs() / static_cast<size_t>(replicas)};
}

// Replica r's bucket is inputs r*k .. r*k+k-1. Where the executor allows, an output reuses its
// input's buffer, so the collective sums in place (Note [In-process all-reduce]).
void all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  const size_t k = ctx.num_inputs() / static_cast<size_t>(replicas);
  const runtime::Reduction reduction = reduction_of(ctx);
  auto calls = std::make_shared<ReplicaCalls>(replicas, std::move(done));
  for (int64_t r = 0; r < replicas; ++r) {
    for (size_t j = 0; j < k; ++j) {
      const size_t i = static_cast<size_t>(r) * k + j;
      const Tensor& input = ctx.input(i);
      calls->inputs[static_cast<size_t>(r)].push_back(input);
      calls->outputs[static_cast<size_t>(r)].push_back(ctx.output_in_place_of_input(i));
    }
  }
  for (int64_t r = 0; r < replicas; ++r) {
    (*collective)
        ->all_reduce(replica_call(ctx, r, replicas), reduction, calls->inputs[static_cast<size_t>(r)],
                     calls->outputs[static_cast<size_t>(r)])
        ->then(ReplicaCalls::replica_done(calls));
  }
}

Expected<std::vector<TensorType>> infer_all_reduce(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  MIRRA_ASSIGN_OR_RETURN(const auto bucket, bucket_of(ctx));
  const size_t k = bucket.second;
  MIRRA_RETURN_IF_ERROR(check_reduction(ctx));
  std::vector<TensorType> outputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    MIRRA_RETURN_IF_ERROR(check_all_reducible(ctx, t));
    MIRRA_RETURN_IF_ERROR(check_matches_replica_0(ctx, i, i % k));
    outputs.push_back(t);
  }
  return outputs;
}

// ---- ReduceScatter ----

// Replica r's outputs are its shares of the flattened sums (or means) of every replica's tensors of
// the bucket (of every worker's replicas, cut again among the workers), in one call per replica.
void reduce_scatter_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = spanning_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  const size_t k = ctx.num_inputs() / static_cast<size_t>(replicas);
  const runtime::Reduction reduction = reduction_of(ctx);
  const int64_t workers = ctx.attr<int64_t>("workers"), worker = ctx.attr<int64_t>("worker");
  auto calls = std::make_shared<ReplicaCalls>(replicas, std::move(done));
  for (int64_t r = 0; r < replicas; ++r) {
    for (size_t j = 0; j < k; ++j) {
      const size_t i = static_cast<size_t>(r) * k + j;
      const Tensor& input = ctx.input(i);
      calls->inputs[static_cast<size_t>(r)].push_back(input);
      calls->outputs[static_cast<size_t>(r)].push_back(
          ctx.allocate_output(i, input.dtype(), {runtime::worker_share(input.num_elements(), replicas, r, workers, worker).count}));
    }
  }
  for (int64_t r = 0; r < replicas; ++r) {
    (*collective)
        ->reduce_scatter(replica_call(ctx, r, replicas), reduction, calls->inputs[static_cast<size_t>(r)],
                         calls->outputs[static_cast<size_t>(r)])
        ->then(ReplicaCalls::replica_done(calls));
  }
}

Expected<std::vector<TensorType>> infer_reduce_scatter(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  MIRRA_RETURN_IF_ERROR(check_reduction(ctx));
  MIRRA_ASSIGN_OR_RETURN(const WorkerPart place, worker_part_of(ctx));
  MIRRA_ASSIGN_OR_RETURN(const auto bucket, bucket_of(ctx));
  const auto [replicas, k] = bucket;
  const DType dtype = ctx.input(0).dtype;
  std::vector<TensorType> shares;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    MIRRA_RETURN_IF_ERROR(check_reduce_scatterable(ctx, t));
    if (t.dtype != dtype) return ctx.error("a bucket holds one dtype: input " + std::to_string(i) + " " + t.to_string());
    MIRRA_RETURN_IF_ERROR(check_matches_replica_0(ctx, i, i % k));
    const std::optional<int64_t> elements = t.shape.num_elements();
    const int64_t r = static_cast<int64_t>(i / k);
    shares.push_back(
        {t.dtype, graph::Shape{elements ? runtime::worker_share(*elements, replicas, r, place.workers, place.worker).count : -1}});
  }
  return shares;
}

// ---- Broadcast and AllGather ----

// Every replica gets its own copy of the source's value (replica 0's, for a mirrored variable):
// replica 0's output takes the value, and the collective broadcasts it from there.
void broadcast_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const Tensor& x = ctx.input(0);
  const int64_t replicas = static_cast<int64_t>(ctx.num_outputs());
  auto calls = std::make_shared<ReplicaCalls>(replicas, std::move(done));
  for (int64_t r = 0; r < replicas; ++r) {
    Tensor& copy = ctx.allocate_output(static_cast<size_t>(r), x.dtype(), x.shape());
    if (r == 0 && x.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), x.raw_data(), x.byte_size());
    calls->outputs[static_cast<size_t>(r)].push_back(copy);
  }
  for (int64_t r = 0; r < replicas; ++r) {
    (*collective)
        ->broadcast(replica_call(ctx, r, replicas), 0, calls->outputs[static_cast<size_t>(r)][0])
        ->then(ReplicaCalls::replica_done(calls));
  }
}

// Every replica gets, for each tensor of the bucket, the concatenation along dim 0 of all replicas'
// values in replica order (across workers: the `rows` that every worker's replicas bring, in
// reduce-scatter's order).
void all_gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = spanning_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const int64_t replicas = ctx.attr<int64_t>("replicas");
  const size_t k = ctx.num_inputs() / static_cast<size_t>(replicas);
  const auto& given_rows = ctx.attr<std::vector<int64_t>>("rows");
  std::vector<runtime::TensorShape> shapes;
  for (size_t j = 0; j < k; ++j) {
    const Tensor& first = ctx.input(j);
    if (first.rank() == 0) return done(graph::invalid_argument("cannot gather scalars along dim 0"));
    int64_t rows = 0;  // given across workers, else the replicas' rows
    for (int64_t r = 0; r < replicas && given_rows.empty(); ++r) rows += ctx.input(static_cast<size_t>(r) * k + j).dim(0);
    shapes.push_back(first.shape());
    shapes.back().set_dim(0, given_rows.empty() ? rows : given_rows[j]);
  }
  auto calls = std::make_shared<ReplicaCalls>(replicas, std::move(done));
  for (int64_t r = 0; r < replicas; ++r) {
    for (size_t j = 0; j < k; ++j) {
      const size_t i = static_cast<size_t>(r) * k + j;
      calls->inputs[static_cast<size_t>(r)].push_back(ctx.input(i));
      calls->outputs[static_cast<size_t>(r)].push_back(ctx.allocate_output(i, ctx.input(j).dtype(), shapes[j]));
    }
  }
  for (int64_t r = 0; r < replicas; ++r) {
    (*collective)
        ->all_gather(replica_call(ctx, r, replicas), calls->inputs[static_cast<size_t>(r)],
                     calls->outputs[static_cast<size_t>(r)])
        ->then(ReplicaCalls::replica_done(calls));
  }
}

Expected<std::vector<TensorType>> infer_broadcast(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  MIRRA_ASSIGN_OR_RETURN(const int64_t replicas, replicas_attr(ctx));
  return std::vector<TensorType>(static_cast<size_t>(replicas), ctx.input(0));
}

Expected<std::vector<TensorType>> infer_all_gather(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  MIRRA_ASSIGN_OR_RETURN(const WorkerPart place, worker_part_of(ctx));
  MIRRA_ASSIGN_OR_RETURN(const auto bucket, bucket_of(ctx));
  const auto [replicas, k] = bucket;
  const auto& given_rows = ctx.attr<std::vector<int64_t>>("rows");
  if (!given_rows.empty() && given_rows.size() != k) return ctx.error("rows must give one count per tensor of the bucket");
  if (place.workers > 1 && given_rows.empty()) return ctx.error("an all-gather across workers needs its outputs' rows");
  std::vector<TensorType> gathered;
  for (size_t j = 0; j < k; ++j) {
    const TensorType& first = ctx.input(j);
    if (first.shape.rank() < 1) return ctx.error("cannot gather scalars along dim 0");
    int64_t rows = 0;
    for (int64_t r = 0; r < replicas; ++r) {
      const size_t i = static_cast<size_t>(r) * k + j;
      const TensorType& t = ctx.input(i);
      bool same = t.dtype == first.dtype && t.shape.rank() == first.shape.rank();
      for (int d = 1; same && d < t.shape.rank(); ++d) {
        same = t.shape.dim(d) < 0 || first.shape.dim(d) < 0 || t.shape.dim(d) == first.shape.dim(d);
      }
      if (!same) return ctx.error("input " + std::to_string(i) + " " + t.to_string() + " does not stack with input " + std::to_string(j));
      rows = rows < 0 || t.shape.dim(0) < 0 ? -1 : rows + t.shape.dim(0);
      if (!given_rows.empty() && t.shape.dim(0) >= 0 &&
          t.shape.dim(0) != runtime::worker_share(given_rows[j], replicas, r, place.workers, place.worker).count) {
        return ctx.error("input " + std::to_string(i) + " " + t.to_string() + " is not its replica's rows of " +
                         std::to_string(given_rows[j]));
      }
    }
    TensorType whole = first;
    whole.shape.dims[0] = given_rows.empty() ? rows : given_rows[j];
    gathered.push_back(whole);
  }
  std::vector<TensorType> outputs;
  for (int64_t r = 0; r < replicas; ++r) outputs.insert(outputs.end(), gathered.begin(), gathered.end());
  return outputs;
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
  // Each collective node meets as the group its name names, its replicas the participants.
  constexpr auto kByNode = runtime::CollectiveGroup::node_name;
  schemas.add(graph::OpSchema{.name = "SplitBatch",
                              .inputs = {"x"},
                              .attrs = {{"replicas", AttrType::integer, {}}},
                              .traits = graph::kForwardsInput,
                              .infer = infer_split_batch,
                              .summary = "Cuts dim 0 into one share per replica (sizes differ by at most one; the "
                                         "first B mod N shares are larger; a share may be empty), as views.",
                              .no_gradient = "it splits the host's input batch, which is never differentiated"});
  kernels.add("SplitBatch", graph::DeviceKind::cpu, {split_batch_kernel});
  schemas.add(graph::OpSchema{.name = "AllReduce",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = {{"replicas", AttrType::integer, {}},
                                        {"reduction", AttrType::string, std::string("sum")},
                                        kImplementationAttr,
                                        kTimeoutAttr},
                              .traits = graph::kCollective,
                              .infer = infer_all_reduce,
                              .summary = "Sum (or mean) of each tensor of a bucket across replicas; every replica "
                                         "receives the same bits. bf16 tensors are summed in f32 and rounded once.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("AllReduce", graph::DeviceKind::cpu, {.expensive = true,
                                                   .reuses_inputs = true,
                                                   .async_fn = all_reduce_kernel,
                                                   .collective_group = kByNode});
  schemas.add(graph::OpSchema{.name = "ReduceScatter",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = {{"replicas", AttrType::integer, {}},
                                        {"reduction", AttrType::string, std::string("sum")},
                                        kImplementationAttr,
                                        kTimeoutAttr,
                                        kWorkersAttr,
                                        kWorkerAttr},
                              .traits = graph::kCollective,
                              .infer = infer_reduce_scatter,
                              .summary = "A bucket of k tensors per replica (replica r's j-th is values[r * k + j]); "
                                         "output r * k + j is replica r's share of the sum (or mean) of every "
                                         "replica's j-th tensor, flattened: shares differ by at most one element, the "
                                         "first larger. Across `workers` workers each share is cut again among them, "
                                         "and this graph holds worker `worker`'s parts.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("ReduceScatter", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = reduce_scatter_kernel, .collective_group = kByNode});
  schemas.add(graph::OpSchema{.name = "Broadcast",
                              .inputs = {"x"},
                              .attrs = {{"replicas", AttrType::integer, {}}, kImplementationAttr, kTimeoutAttr},
                              .traits = graph::kCollective,
                              .infer = infer_broadcast,
                              .summary = "A copy of x for every replica.",
                              .no_gradient = "it distributes state (initial values), which is not differentiated"});
  kernels.add("Broadcast", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = broadcast_kernel, .collective_group = kByNode});
  schemas.add(graph::OpSchema{.name = "AllGather",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = {{"replicas", AttrType::integer, {}},
                                        kImplementationAttr,
                                        kTimeoutAttr,
                                        kWorkersAttr,
                                        kWorkerAttr,
                                        {"rows", AttrType::int_list, std::vector<int64_t>{}}},
                              .traits = graph::kCollective,
                              .infer = infer_all_gather,
                              .summary = "A bucket of k tensors per replica (replica r's j-th is values[r * k + j]); "
                                         "output r * k + j is every replica's j-th tensor stacked along dim 0, in "
                                         "replica order. Across `workers` workers it undoes ReduceScatter: output j "
                                         "has rows[j] rows, of which this worker's replicas bring theirs.",
                              .no_gradient = "it gathers results (metrics, predictions), which are not differentiated"});
  kernels.add("AllGather", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = all_gather_kernel, .collective_group = kByNode});
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

std::vector<graph::ValueRef> all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                        std::string_view reduction, const CollectiveOptions& options) {
  return outputs_of(b.add({.op = "AllReduce",
                           .inputs = values,
                           .attrs = {{"replicas", replicas},
                                     {"reduction", std::string(reduction)},
                                     {"implementation", options.implementation},
                                     {"timeout_ms", options.timeout_ms}}}),
                    values.size());
}

std::vector<graph::ValueRef> reduce_scatter(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                            std::string_view reduction, const CollectiveOptions& options,
                                            const WorkerPart& part) {
  return outputs_of(b.add({.op = "ReduceScatter",
                           .inputs = values,
                           .attrs = {{"replicas", replicas},
                                     {"reduction", std::string(reduction)},
                                     {"implementation", options.implementation},
                                     {"timeout_ms", options.timeout_ms},
                                     {"workers", part.workers},
                                     {"worker", part.worker}}}),
                    values.size());
}

std::vector<graph::ValueRef> broadcast(graph::Builder& b, graph::ValueRef x, int64_t replicas,
                                       const CollectiveOptions& options) {
  return outputs_of(b.add({.op = "Broadcast",
                           .inputs = {x},
                           .attrs = {{"replicas", replicas},
                                     {"implementation", options.implementation},
                                     {"timeout_ms", options.timeout_ms}}}),
                    output_count(replicas));
}

std::vector<graph::ValueRef> all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& values, int64_t replicas,
                                        const CollectiveOptions& options, const WorkerPart& part,
                                        std::vector<int64_t> rows) {
  return outputs_of(b.add({.op = "AllGather",
                           .inputs = values,
                           .attrs = {{"replicas", replicas},
                                     {"implementation", options.implementation},
                                     {"timeout_ms", options.timeout_ms},
                                     {"workers", part.workers},
                                     {"worker", part.worker},
                                     {"rows", std::move(rows)}}}),
                    values.size());
}

graph::ValueRef dim_size(graph::Builder& b, graph::ValueRef x, int64_t axis) {
  return b.add_value({.op = "DimSize", .inputs = {x}, .attrs = {{"axis", axis}}});
}

}  // namespace mirra::ops
