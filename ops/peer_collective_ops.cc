// PeerAllReduce, PeerReduceScatter and PeerAllGather: schemas, builders and CPU kernels (a rank's
// call of the session's Communicator, asynchronously; on cpu_async devices staged through host memory,
// as GPUs' NCCL calls run beside their compute). The GPU kernels are in ops/cuda/nccl_kernels.cc.
#include "ops/peer_collective_ops.h"

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

// The attrs of a device's rank of a collective among devices, and `extra` (the reduction, or the
// gathered sizes).
std::vector<graph::AttrSpec> peer_attrs(graph::AttrSpec extra) {
  return {{"group", AttrType::string, {}},
          {"rank", AttrType::integer, {}},
          {"ranks", AttrType::integer, {}},
          std::move(extra),
          kImplementationAttr,
          kTimeoutAttr};
}
const graph::AttrSpec kGatheredElementsAttr{"elements", AttrType::int_list, std::vector<int64_t>{}};

// A rank's call of the session's collective: the tensors it passes (host copies on a device with
// memory of its own), the host buffers the results come back in, and the outputs they return to.
struct RankCall {
  std::vector<Tensor> inputs, results, outputs;
  bool staged = false;
  runtime::MemorySpace space;
  runtime::Stream* stream = nullptr;  // where staged results return: the device's communication stream
  runtime::KernelDone done;
};

Tensor host_copy(const Tensor& t) {
  Tensor copy = Tensor::empty(runtime::host_allocator(), t.dtype(), t.shape());
  if (t.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), t.raw_data(), t.byte_size());
  return copy;
}

// The rank's call, with `outputs[j]` receiving the result for input j. On cpu devices (host memory)
// the collective reads the inputs and writes the outputs themselves; on cpu_async devices, the GPU's
// model, the inputs are staged through host memory and the results return on the device's
// communication stream (beside the compute stream, as a GPU's NCCL calls run), so CI runs the graphs
// GPUs run with NCCL (ops/cuda/nccl_kernels.cc).
std::shared_ptr<RankCall> rank_call_of(KernelContext& ctx, std::vector<Tensor> outputs, runtime::KernelDone done) {
  auto call = std::make_shared<RankCall>();
  call->space = ctx.device().memory_space();
  call->staged = !call->space.host;
  call->stream = &ctx.device().communication_stream();
  call->done = std::move(done);
  // Staging touches host memory from the device's side, as a copy does.
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    call->inputs.push_back(call->staged ? host_copy(input) : input);
    call->results.push_back(call->staged ? Tensor::empty(runtime::host_allocator(), outputs[j].dtype(), outputs[j].shape())
                                         : outputs[j]);
  }
  call->outputs = std::move(outputs);
  return call;
}

// On a device with streams of its own the results return on its communication stream (rank_call_of),
// so the outputs are allocated for that stream, as a GPU's NCCL outputs are.
const void* output_stream(const KernelContext& ctx) {
  return ctx.device().asynchronous() ? &ctx.device().communication_stream() : nullptr;
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

// The node's rank in its group's execution for this step.
runtime::CollectiveCall peer_call(const KernelContext& ctx) {
  return {.group = ctx.attr<std::string>("group"),
          .instance = ctx.collective_instance(),
          .participant = static_cast<int>(ctx.attr<int64_t>("rank")),
          .group_size = static_cast<int>(ctx.attr<int64_t>("ranks")),
          .deadline = runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms")))};
}

// One device's rank of an all-reduce among devices, summed in place where the executor allows.
void peer_all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  std::vector<Tensor> outputs;
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  for (size_t j = 0; j < ctx.num_inputs(); ++j) outputs.push_back(ctx.output_in_place_of_input(j));
  auto call = rank_call_of(ctx, std::move(outputs), std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank sums on this thread
  (*collective)->all_reduce(peer_call(ctx), reduction_of(ctx), call->inputs, call->results)->then(returning_results(call));
}

// One device's rank of a reduce-scatter among devices: output j is the rank's share of the flattened
// sum of every rank's values[j].
void peer_reduce_scatter_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  std::vector<Tensor> outputs;
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  for (size_t j = 0; j < ctx.num_inputs(); ++j) {
    const Tensor& input = ctx.input(j);
    outputs.push_back(
        ctx.allocate_output(j, input.dtype(), {runtime::participant_share(input.num_elements(), ranks, rank)}));
  }
  auto call = rank_call_of(ctx, std::move(outputs), std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank reduces on this thread
  (*collective)
      ->reduce_scatter(peer_call(ctx), reduction_of(ctx), call->inputs, call->results)
      ->then(returning_results(call));
}

// One device's rank of an all-gather among devices: output j is every rank's values[j] (its share
// of `elements[j]`, as reduce-scatter cuts them) joined in rank order.
void peer_all_gather_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = node_communicator(ctx);
  if (!collective.ok()) return done(collective.status());
  const auto& elements = ctx.attr<std::vector<int64_t>>("elements");
  std::vector<Tensor> outputs;
  const runtime::ScopedAllocationStream allocating(output_stream(ctx));
  for (size_t j = 0; j < ctx.num_inputs(); ++j) outputs.push_back(ctx.allocate_output(j, ctx.input(j).dtype(), {elements[j]}));
  auto call = rank_call_of(ctx, std::move(outputs), std::move(done));
  runtime::ScopedMemoryAccess access(call->space, /*host_too=*/true);  // the last rank gathers on this thread
  (*collective)->all_gather(peer_call(ctx), call->inputs, call->results)->then(returning_results(call));
}

// The attrs every rank's node has: its group and its rank of `ranks`.
Status check_peer_attrs(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_collective_attrs(ctx));
  if (ctx.attr<std::string>("group").empty()) return ctx.error("group must name the collective every rank takes part in");
  const int64_t ranks = ctx.attr<int64_t>("ranks"), rank = ctx.attr<int64_t>("rank");
  if (ranks < 1 || ranks > kMaxReplicas) return ctx.error("ranks must be in [1, 4096]");
  if (rank < 0 || rank >= ranks) return ctx.error("rank must be in [0, ranks)");
  return Status();
}

Expected<std::vector<TensorType>> infer_peer_all_reduce(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_peer_attrs(ctx));
  MIRRA_RETURN_IF_ERROR(check_reduction(ctx));
  std::vector<TensorType> outputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    MIRRA_RETURN_IF_ERROR(check_all_reducible(ctx, ctx.input(i)));
    outputs.push_back(ctx.input(i));
  }
  return outputs;
}

Expected<std::vector<TensorType>> infer_peer_reduce_scatter(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_peer_attrs(ctx));
  MIRRA_RETURN_IF_ERROR(check_reduction(ctx));
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  std::vector<TensorType> shares;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    MIRRA_RETURN_IF_ERROR(check_reduce_scatterable(ctx, t));
    const std::optional<int64_t> elements = t.shape.num_elements();
    shares.push_back({t.dtype, graph::Shape{elements ? runtime::participant_share(*elements, ranks, rank) : -1}});
  }
  return shares;
}

Expected<std::vector<TensorType>> infer_peer_all_gather(const InferContext& ctx) {
  MIRRA_RETURN_IF_ERROR(check_peer_attrs(ctx));
  const int64_t rank = ctx.attr<int64_t>("rank"), ranks = ctx.attr<int64_t>("ranks");
  const auto& elements = ctx.attr<std::vector<int64_t>>("elements");
  if (elements.size() != ctx.num_inputs()) return ctx.error("elements must give the gathered size of every input");
  std::vector<TensorType> gathered;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (elements[i] < 0) return ctx.error("elements must not be negative");
    const int64_t share = runtime::participant_share(elements[i], ranks, rank);
    if (t.shape.rank() != 1 || (t.shape.dim(0) >= 0 && t.shape.dim(0) != share)) {
      return ctx.error("input " + std::to_string(i) + " " + t.to_string() + " is not rank " + std::to_string(rank) +
                       "'s share of " + std::to_string(elements[i]) + " elements (" + std::to_string(share) + ")");
    }
    gathered.push_back({t.dtype, graph::Shape{elements[i]}});
  }
  return gathered;
}

}  // namespace

void register_peer_collective_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  // Each rank is a node of its own, meeting the others as the group its `group` attr names.
  constexpr auto kByGroup = runtime::CollectiveGroup::group_attr;
  schemas.add(graph::OpSchema{.name = "PeerAllReduce",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = peer_attrs(kReductionAttr),
                              .traits = graph::kCollective,
                              .infer = infer_peer_all_reduce,
                              .summary = "Rank `rank` of `ranks` devices in all-reduce `group`: output j is the sum "
                                         "(or mean) of every rank's values[j], in this device's memory; every rank "
                                         "receives the same bits.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("PeerAllReduce", graph::DeviceKind::cpu,
              {.expensive = true,
               .reuses_inputs = true,
               .async_fn = peer_all_reduce_kernel,
               .collective_group = kByGroup});
  schemas.add(graph::OpSchema{.name = "PeerReduceScatter",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = peer_attrs(kReductionAttr),
                              .traits = graph::kCollective,
                              .infer = infer_peer_reduce_scatter,
                              .summary = "Rank `rank` of `ranks` devices in reduce-scatter `group`: output j is "
                                         "this rank's share of the sum (or mean) of every rank's values[j], "
                                         "flattened (shares differ by at most one element, the first larger), in "
                                         "this device's memory.",
                              .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("PeerReduceScatter", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = peer_reduce_scatter_kernel, .collective_group = kByGroup});
  schemas.add(graph::OpSchema{.name = "PeerAllGather",
                              .inputs = {"values"},
                              .variadic = true,
                              .attrs = peer_attrs(kGatheredElementsAttr),
                              .traits = graph::kCollective,
                              .infer = infer_peer_all_gather,
                              .summary = "Rank `rank` of `ranks` devices in all-gather `group`, undoing "
                                         "PeerReduceScatter: values[j] is this rank's share of elements[j] "
                                         "elements (shares differ by at most one, the first larger), and output j "
                                         "is every rank's share joined in rank order, in this device's memory.",
                              .no_gradient = "it joins updated shares of the variables, which are not differentiated"});
  kernels.add("PeerAllGather", graph::DeviceKind::cpu,
              {.expensive = true, .async_fn = peer_all_gather_kernel, .collective_group = kByGroup});
}

namespace {

// A device's rank of collective `op` among devices, one output per value; `extra` names its last attr
// (the reduction, or the gathered sizes), as peer_attrs does for its schema.
std::vector<graph::ValueRef> peer_collective(graph::Builder& b, const std::string& op,
                                             const std::vector<graph::ValueRef>& values, const PeerRank& rank,
                                             const std::string& extra, graph::AttrValue extra_value,
                                             const CollectiveOptions& options) {
  return outputs_of(b.add({.op = op,
                           .inputs = values,
                           .attrs = {{"group", rank.group},
                                     {"rank", rank.rank},
                                     {"ranks", rank.ranks},
                                     {extra, std::move(extra_value)},
                                     {"implementation", options.implementation},
                                     {"timeout_ms", options.timeout_ms}}}),
                    values.size());
}

}  // namespace

std::vector<graph::ValueRef> peer_all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                             const PeerRank& rank, std::string_view reduction,
                                             const CollectiveOptions& options) {
  return peer_collective(b, "PeerAllReduce", values, rank, "reduction", std::string(reduction), options);
}

std::vector<graph::ValueRef> peer_reduce_scatter(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                                 const PeerRank& rank, std::string_view reduction,
                                                 const CollectiveOptions& options) {
  return peer_collective(b, "PeerReduceScatter", values, rank, "reduction", std::string(reduction), options);
}

std::vector<graph::ValueRef> peer_all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& shares,
                                             const PeerRank& rank, std::vector<int64_t> elements,
                                             const CollectiveOptions& options) {
  return peer_collective(b, "PeerAllGather", shares, rank, "elements", std::move(elements), options);
}

}  // namespace mirra::ops
