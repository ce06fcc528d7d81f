// AllReduce, ReduceScatter, AllGather, Broadcast, Send and Recv: schemas, builders and CPU kernels (a rank's call of
// the session's Communicator, asynchronously). A rank on a device with memory of its own (cpu_async,
// the GPU's model) is staged through host memory, as a GPU's NCCL call runs beside its compute,
// unless every rank shares that memory. The GPU kernels are in ops/cuda/nccl_kernels.cc.
#include "ops/collective_ops.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "ops/collective_attrs.h"
#include "ops/op_families.h"
#include "runtime/allocator.h"
#include "runtime/memory_space.h"

namespace mirra::ops {

using graph::AttrType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

// The attrs of every rank's node, then `extra` (the reduction, the gathered rows, the root, the
// worker part).
std::vector<graph::AttrSpec> rank_attrs(std::vector<graph::AttrSpec> extra) {
  std::vector<graph::AttrSpec> attrs = {{"group", AttrType::string, {}},
                                        {"rank", AttrType::integer, {}},
                                        {"ranks", AttrType::integer, {}},
                                        {"shared_memory", AttrType::boolean, false},
                                        kImplementationAttr,
                                        kTimeoutAttr};
  attrs.insert(attrs.end(), extra.begin(), extra.end());
  return attrs;
}
// ReduceScatter and AllGather may span worker processes: `workers` of them, this graph being worker
// `worker`'s part. The shares (or rows) each rank holds then depend on both (runtime::worker_share).
const graph::AttrSpec kWorkersAttr{"workers", AttrType::integer, int64_t{1}};
const graph::AttrSpec kWorkerAttr{"worker", AttrType::integer, int64_t{0}};
const graph::AttrSpec kRowsAttr{"rows", AttrType::int_list, {}};
const graph::AttrSpec kRootAttr{"root", AttrType::integer, int64_t{0}};

// A rank's call of the session's collective: the tensors it passes (host copies when staged), the
// buffers the results come back in, and the outputs they return to.
struct RankCall {
  std::vector<Tensor> inputs, results, outputs;
  bool staged = false;
  runtime::MemorySpace space;
  runtime::Stream* stream = nullptr;  // where staged results return: the device's communication stream
  runtime::KernelDone done;
};

// On a device with memory of its own whose peers are elsewhere (one rank per cpu_async device, as one
// per GPU), the inputs are staged through host memory and the results return on the device's
// communication stream; ranks on cpu devices, or sharing one device's memory, are read and written
// where they are.
bool staged(const KernelContext& ctx) {
  return !ctx.device().memory_space().host && !ctx.attr<bool>("shared_memory");
}

// Outputs returned on a communication stream are allocated for it.
const void* output_stream(const KernelContext& ctx) { return staged(ctx) ? &ctx.device().communication_stream() : nullptr; }

// The rank's call, with `outputs[j]` receiving the result for input j.
std::shared_ptr<RankCall> rank_call_of(KernelContext& ctx, std::vector<Tensor> outputs, runtime::KernelDone done) {
  auto call = std::make_shared<RankCall>();
  call->space = ctx.device().memory_space();
  call->staged = staged(ctx);
  call->stream = &ctx.device().communication_stream();
  call->done = std::move(done);
  // Staging touches host memory from the device's side, as a copy does.
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    call->inputs.push_back(call->staged ? runtime::host_copy(input) : input);
    call->results.push_back(call->staged ? Tensor::empty(runtime::host_allocator(), outputs[j].dtype(), outputs[j].shape())
                                         : outputs[j]);
  }
  call->outputs = std::move(outputs);
  return call;
}

// What the collective calls back: the rank's node completes, once staged results are back in its
// outputs (whichever rank's thread completed the collective).
runtime::CollectiveDone returning_results(std::shared_ptr<RankCall> call) {
  return [call](Status status) {
    if (!call->staged || !status.ok()) return call->done(std::move(status));
    call->stream->enqueue([call] {
      runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);
      for (size_t j = 0; j < call->results.size(); ++j) {
        if (call->results[j].byte_size() > 0) {
          std::memcpy(call->outputs[j].mutable_raw_data(), call->results[j].raw_data(), call->results[j].byte_size());
        }
      }
      call->done(Status());
    });
  };
}

// The node's rank in its group's execution for this run.
runtime::CollectiveCall rank_call(const KernelContext& ctx) {
  return {.group = ctx.attr<std::string>("group"),
          .instance = ctx.collective_instance(),
          .participant = static_cast<int>(ctx.attr<int64_t>("rank")),
          .group_size = static_cast<int>(ctx.attr<int64_t>("ranks")),
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

// This rank's part of `count` elements (or rows) of the whole, by its attrs.
runtime::ShareRange part_of(const KernelContext& ctx, int64_t count) {
  return runtime::worker_share(count, ctx.attr<int64_t>("ranks"), ctx.attr<int64_t>("rank"), ctx.attr<int64_t>("workers"),
                               ctx.attr<int64_t>("worker"));
}

// A rank's part of an all-reduce, summed in place where the executor allows.
void all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  std::vector<Tensor> outputs;
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  for (size_t j = 0; j < ctx.num_inputs(); ++j) outputs.push_back(ctx.output_in_place_of_input(j));
  auto call = rank_call_of(ctx, std::move(outputs), std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank sums on this thread
  (*collective)->all_reduce(rank_call(ctx), reduction_of(ctx), call->inputs, call->results)->then(returning_results(call));
}

// A rank's part of a reduce-scatter: output j is its share of the flattened sum of every rank's values[j].
void reduce_scatter_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = spanning_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  std::vector<Tensor> outputs;
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    outputs.push_back(ctx.allocate_output(j, input.dtype(), {part_of(ctx, input.num_elements()).count}));
  }
  auto call = rank_call_of(ctx, std::move(outputs), std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank reduces on this thread
  (*collective)
      ->reduce_scatter(rank_call(ctx), reduction_of(ctx), call->inputs, call->results)
      ->then(returning_results(call));
}

// A rank's part of an all-gather: output j is every rank's rows of tensor j joined in order.
void all_gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = spanning_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const auto& rows = ctx.attr<std::vector<int64_t>>("rows");
  std::vector<Tensor> outputs;
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& part = ctx.input(j);
    if (part.rank() == 0 || part.dim(0) != part_of(ctx, rows[j]).count) {
      return done(graph::invalid_argument("'" + ctx.node().name + "': input " + std::to_string(j) + " " + part.type_string() +
                                          " is not its rank's rows of " + std::to_string(rows[j])));
    }
    runtime::TensorShape shape = part.shape();
    shape.set_dim(0, rows[j]);
    outputs.push_back(ctx.allocate_output(j, part.dtype(), shape));
  }
  auto call = rank_call_of(ctx, std::move(outputs), std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank gathers on this thread
  (*collective)->all_gather(rank_call(ctx), call->inputs, call->results)->then(returning_results(call));
}

// A rank's part of a broadcast: its output starts as its own value and receives the root's.
void broadcast_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  auto call = rank_call_of(ctx, {ctx.output_in_place_of_input(0)}, std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank copies on this thread
  Tensor& buffer = call->results[0];
  const Tensor& value = call->inputs[0];
  if (buffer.byte_size() > 0 && buffer.raw_data() != value.raw_data()) {
    std::memcpy(buffer.mutable_raw_data(), value.raw_data(), value.byte_size());
  }
  (*collective)->broadcast(rank_call(ctx), static_cast<int>(ctx.attr<int64_t>("root")), buffer)->then(returning_results(call));
}

// The node's half of transfer `group` (participant 0 sends, 1 receives).
runtime::CollectiveCall transfer_call(const KernelContext& ctx, int participant) {
  return {.group = ctx.attr<std::string>("group"),
          .instance = ctx.collective_instance(),
          .participant = participant,
          .group_size = 2,
          .peer = static_cast<int>(ctx.attr<int64_t>("peer_task")),
          .deadline = runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms")))};
}

// Its input (in host memory: the kernel says so, so placement copies a device's value there), to the
// Recv of its group in another task.
void send_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  (*collective)->send(transfer_call(ctx, 0), ctx.input(0))->then(std::move(done));
}

// What the Send of its group in another task sent, in host memory (placement copies it on to a device
// of its own); the executor checks it against the declared type.
void recv_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  auto received = std::make_shared<Tensor>();
  KernelContext* context = &ctx;
  (*collective)->recv(transfer_call(ctx, 1), *received)->then([context, received, done = std::move(done)](Status status) {
    if (status.ok()) context->set_output(0, std::move(*received));
    done(std::move(status));
  });
}

Status check_transfer_attrs(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  if (ctx.attr<std::string>("group").empty()) return ctx.error("group must name the transfer its Send and Recv take part in");
  const int64_t peer = ctx.attr<int64_t>("peer_task");
  if (peer < -1 || peer >= kMaxReplicas) return ctx.error("peer_task must be -1 (this process) or a task in [0, 4096)");
  return Status();
}

// The attrs every rank's node has: its group and its rank of `ranks`.
Status check_rank_attrs(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  if (ctx.attr<std::string>("group").empty()) return ctx.error("group must name the collective every rank takes part in");
  const int64_t ranks = ctx.attr<int64_t>("ranks"), rank = ctx.attr<int64_t>("rank");
  if (ranks < 1 || ranks > kMaxReplicas) return ctx.error("ranks must be in [1, 4096]");
  if (rank < 0 || rank >= ranks) return ctx.error("rank must be in [0, ranks)");
  return Status();
}

// This rank's part of `count` elements (or rows) of the whole, by the node's attrs (checked).
Expected<runtime::ShareRange> inferred_part(const InferContext& ctx, int64_t count) {
  const int64_t workers = ctx.attr<int64_t>("workers"), worker = ctx.attr<int64_t>("worker");
  if (workers < 1 || workers > kMaxReplicas) return ctx.error("workers must be in [1, 4096]");
  if (worker < 0 || worker >= workers) return ctx.error("worker must be in [0, workers)");
  return runtime::worker_share(count, ctx.attr<int64_t>("ranks"), ctx.attr<int64_t>("rank"), workers, worker);
}

Expected<std::vector<TensorType>> infer_all_reduce(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_rank_attrs(ctx));
  MIRRA_RETURN_IF_ERROR(check_reduction(ctx));
  std::vector<TensorType> outputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    MIRRA_RETURN_IF_ERROR(check_all_reducible(ctx, ctx.input(i)));
    outputs.push_back(ctx.input(i));
  }
  return outputs;
}

Expected<std::vector<TensorType>> infer_reduce_scatter(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_rank_attrs(ctx));
  MIRRA_RETURN_IF_ERROR(check_reduction(ctx));
  MIRRA_RETURN_IF_ERROR(inferred_part(ctx, 0).status());
  std::vector<TensorType> shares;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    MIRRA_RETURN_IF_ERROR(check_reduce_scatterable(ctx, t));
    const std::optional<int64_t> elements = t.shape.num_elements();
    shares.push_back({t.dtype, graph::Shape{elements ? inferred_part(ctx, *elements)->count : -1}});
  }
  return shares;
}

Expected<std::vector<TensorType>> infer_all_gather(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_rank_attrs(ctx));
  const auto& rows = ctx.attr<std::vector<int64_t>>("rows");
  if (rows.size() != ctx.num_inputs()) return ctx.error("rows must give the gathered rows of every input");
  std::vector<TensorType> gathered;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (rows[i] < 0) return ctx.error("rows must not be negative");
    MIRRA_ASSIGN_OR_RETURN(const runtime::ShareRange part, inferred_part(ctx, rows[i]));
    if (t.shape.rank() < 1 || (t.shape.dim(0) >= 0 && t.shape.dim(0) != part.count)) {
      return ctx.error("input " + std::to_string(i) + " " + t.to_string() + " is not this rank's " +
                       std::to_string(part.count) + " rows of " + std::to_string(rows[i]));
    }
    TensorType whole = t;
    whole.shape.dims[0] = rows[i];
    gathered.push_back(whole);
  }
  return gathered;
}

Expected<std::vector<TensorType>> infer_broadcast(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_rank_attrs(ctx));
  const int64_t root = ctx.attr<int64_t>("root");
  if (root < 0 || root >= kMaxReplicas * kMaxReplicas) return ctx.error("root must name a participant");
  return std::vector<TensorType>{ctx.input(0)};
}

}  // namespace

void register_collective_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = "AllReduce",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = rank_attrs({kReductionAttr}),
                              .traits = graph::kCollective,
                              .infer = infer_all_reduce,
                              .summary = "Rank `rank` of `ranks` in all-reduce `group`: output j is the sum (or "
                                         "mean) of every rank's values[j] (of every worker's ranks), in this "
                                         "device's memory; every rank receives the same bits. bf16 values are "
                                         "summed in f32 and rounded once.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("AllReduce", graph::DeviceKind::cpu,
              {.expensive = true, .reuses_inputs = true, .async_fn = all_reduce_kernel, .collective = true});
  schemas.add(graph::OpSchema{.name = "ReduceScatter",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = rank_attrs({kReductionAttr, kWorkersAttr, kWorkerAttr}),
                              .traits = graph::kCollective,
                              .infer = infer_reduce_scatter,
                              .summary = "Rank `rank` of `ranks` in reduce-scatter `group`: output j is this "
                                         "rank's share of the sum (or mean) of every rank's values[j], flattened "
                                         "(shares differ by at most one element, the first larger). Across "
                                         "`workers` workers each share is cut again among them, and this graph "
                                         "holds worker `worker`'s parts.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("ReduceScatter", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = reduce_scatter_kernel, .collective = true});
  schemas.add(graph::OpSchema{.name = "AllGather",
                              .inputs = {"parts"},
                              .variadic = true,
                              .attrs = rank_attrs({kRowsAttr, kWorkersAttr, kWorkerAttr}),
                              .traits = graph::kCollective,
                              .infer = infer_all_gather,
                              .summary = "Rank `rank` of `ranks` in all-gather `group`, undoing ReduceScatter "
                                         "along dim 0: parts[j] is this rank's rows of rows[j] (cut as "
                                         "ReduceScatter cuts, across workers too), and output j is every rank's "
                                         "joined in order.",
                              .no_gradient = "it joins updated shares of the variables, which are not differentiated"});
  kernels.add("AllGather", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = all_gather_kernel, .collective = true});
  schemas.add(graph::OpSchema{.name = "Broadcast",
                              .inputs = {"x"},
                              .attrs = rank_attrs({kRootAttr}),
                              .traits = graph::kCollective,
                              .infer = infer_broadcast,
                              .summary = "Rank `rank` of `ranks` in broadcast `group`: the value x has on "
                                         "participant `root` (across workers participant p of worker w is "
                                         "w * ranks + p), for every rank.",
                              .no_gradient = "it distributes state (initial values), which is not differentiated"});
  kernels.add("Broadcast", graph::DeviceKind::cpu,
              {.expensive = true, .reuses_inputs = true, .async_fn = broadcast_kernel, .collective = true});
  // peer_task: the task on the other side (a worker's rank across processes); -1: a task of this process.
  const std::vector<graph::AttrSpec> transfer_attrs = {
      {"group", AttrType::string, {}}, {"peer_task", AttrType::integer, int64_t{-1}}, kImplementationAttr, kTimeoutAttr};
  schemas.add(graph::OpSchema{.name = "Send",
                              .inputs = {"x"},
                              .attrs = transfer_attrs,
                              .traits = graph::kCollective,
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                MIRRA_RETURN_IF_ERROR(check_transfer_attrs(ctx));
                                return std::vector<TensorType>{};
                              },
                              .summary = "Sends x to the Recv of transfer `group`, in another task's graph (a value "
                                         "that crosses from one task to another: ops/task_partition.h).",
                              .no_gradient = "a partitioned graph is differentiated before it is cut"});
  kernels.add("Send", graph::DeviceKind::cpu, {.async_fn = send_kernel, .host_memory_inputs = 1, .collective = true});
  std::vector<graph::AttrSpec> recv_attrs = transfer_attrs;
  recv_attrs.push_back({"dtype", AttrType::dtype, {}});
  recv_attrs.push_back({"shape", AttrType::shape, {}});
  schemas.add(graph::OpSchema{.name = "Recv",
                              .attrs = recv_attrs,
                              .traits = graph::kCollective,
                              .infer = [](const InferContext& ctx) -> Expected<std::vector<TensorType>> {
                                MIRRA_RETURN_IF_ERROR(check_transfer_attrs(ctx));
                                return std::vector<TensorType>{{ctx.attr<graph::DType>("dtype"), ctx.attr<graph::Shape>("shape")}};
                              },
                              .summary = "The value the Send of transfer `group` sends from another task's graph, of "
                                         "type `dtype` and `shape` (-1: any size).",
                              .no_gradient = "a partitioned graph is differentiated before it is cut"});
  kernels.add("Recv", graph::DeviceKind::cpu, {.async_fn = recv_kernel, .host_memory_outputs = 1, .collective = true});
}

namespace {

// A rank's node of collective `op` with `attrs` after the rank's; one output per value.
std::vector<graph::ValueRef> rank_node(graph::Builder& b, const std::string& op, const std::vector<graph::ValueRef>& values,
                                       const CollectiveRank& rank, const CollectiveOptions& options,
                                       std::vector<std::pair<std::string, graph::AttrValue>> attrs) {
  graph::NodeSpec spec{.op = op,
                       .inputs = values,
                       .attrs = {{"group", rank.group},
                                 {"rank", rank.rank},
                                 {"ranks", rank.ranks},
                                 {"implementation", options.implementation},
                                 {"timeout_ms", options.timeout_ms}}};
  if (rank.shared_memory) spec.attrs.set("shared_memory", true);
  for (auto& [name, value] : attrs) spec.attrs.set(name, std::move(value));
  return outputs_of(b.add(std::move(spec)), values.size());
}

std::vector<std::pair<std::string, graph::AttrValue>> worker_attrs(const WorkerPart& part) {
  if (part.workers == 1) return {};
  return {{"workers", part.workers}, {"worker", part.worker}};
}

}  // namespace

std::vector<graph::ValueRef> all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                        const CollectiveRank& rank, std::string_view reduction,
                                        const CollectiveOptions& options) {
  return rank_node(b, "AllReduce", values, rank, options, {{"reduction", std::string(reduction)}});
}

std::vector<graph::ValueRef> reduce_scatter(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                            const CollectiveRank& rank, std::string_view reduction,
                                            const CollectiveOptions& options, const WorkerPart& part) {
  auto attrs = worker_attrs(part);
  attrs.emplace_back("reduction", std::string(reduction));
  return rank_node(b, "ReduceScatter", values, rank, options, std::move(attrs));
}

std::vector<graph::ValueRef> all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& parts,
                                        const CollectiveRank& rank, std::vector<int64_t> rows,
                                        const CollectiveOptions& options, const WorkerPart& part) {
  auto attrs = worker_attrs(part);
  attrs.emplace_back("rows", std::move(rows));
  return rank_node(b, "AllGather", parts, rank, options, std::move(attrs));
}

graph::ValueRef broadcast(graph::Builder& b, graph::ValueRef x, const CollectiveRank& rank, int64_t root,
                          const CollectiveOptions& options) {
  return rank_node(b, "Broadcast", {x}, rank, options, {{"root", root}}).front();
}

}  // namespace mirra::ops
