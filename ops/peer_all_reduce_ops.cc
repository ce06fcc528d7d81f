// PeerAllReduce: one device's part of an all-reduce among devices that sum among themselves, each
// reading and writing only its own memory (NCCL between GPUs, ops/cuda/nccl_kernels.cc). Schema,
// builder and the CPU kernel, which serves cpu devices (host memory) and cpu_async devices, the
// GPU's model: there the bucket is staged through host memory on the device's own stream and the
// ranks meet in the session's in-process collective, so CI runs the graphs GPUs run with NCCL.
#include <chrono>
#include <cstring>
#include <memory>

#include "ops/distribute_ops.h"
#include "ops/op_families.h"
#include "ops/shape_inference.h"
#include "runtime/memory_space.h"

namespace mirra::ops {

using graph::AttrType;
using graph::DType;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

constexpr int64_t kMaxRanks = 4096;

// Rank `rank`'s call, with the tensors it passes to the collective (host copies on a device with
// memory of its own) and the outputs they return to.
struct RankCall {
  std::vector<Tensor> inputs, sums, outputs;
  runtime::KernelDone done;
};

Tensor host_copy(const Tensor& t) {
  Tensor copy = Tensor::empty(runtime::host_allocator(), t.dtype(), t.shape());
  if (t.byte_size() > 0) std::memcpy(copy.mutable_raw_data(), t.raw_data(), t.byte_size());
  return copy;
}

void peer_all_reduce_kernel(KernelContext& ctx, runtime::KernelDone done) {
  auto collective = ctx.collective(ctx.attr<std::string>("implementation"));
  if (!collective.ok()) return done(collective.status());
  const runtime::MemorySpace space = ctx.device().memory_space();
  const bool staged = !space.host;
  auto call = std::make_shared<RankCall>();
  call->done = std::move(done);
  {
    // Staging touches host memory from the device's stream, as a copy does.
    runtime::ScopedMemoryAccess access(space, /*host_too=*/true);
    for (size_t j = 0; j < ctx.num_inputs(); ++j) {
      const Tensor& input = ctx.input(j);
      const Tensor& output = ctx.output_in_place_of_input(j);
      call->outputs.push_back(output);
      call->inputs.push_back(staged ? host_copy(input) : input);
      call->sums.push_back(staged ? Tensor::empty(runtime::host_allocator(), input.dtype(), input.shape()) : output);
    }
  }
  const runtime::CollectiveCall rank_call{
      .group = ctx.attr<std::string>("group"),
      .instance = ctx.step_id(),
      .participant = static_cast<int>(ctx.attr<int64_t>("rank")),
      .group_size = static_cast<int>(ctx.attr<int64_t>("ranks")),
      .deadline = runtime::deadline_after(std::chrono::milliseconds(ctx.attr<int64_t>("timeout_ms")))};
  const runtime::Reduction reduction =
      ctx.attr<std::string>("reduction") == "mean" ? runtime::Reduction::mean : runtime::Reduction::sum;
  runtime::Stream* stream = &ctx.device().compute_stream();
  // The last rank to arrive sums every rank's host copies on its own thread.
  runtime::ScopedMemoryAccess access(space, /*host_too=*/true);
  (*collective)->all_reduce(rank_call, reduction, call->inputs, call->sums, [call, staged, stream, space](graph::Status status) {
    if (!staged || !status.ok()) return call->done(std::move(status));
    // The sums return into device memory on the device's own stream, whichever rank's thread
    // completed the collective.
    stream->enqueue([call, space] {
      runtime::ScopedMemoryAccess access(space, /*host_too=*/true);
      for (size_t j = 0; j < call->sums.size(); ++j) {
        if (call->sums[j].byte_size() > 0) {
          std::memcpy(call->outputs[j].mutable_raw_data(), call->sums[j].raw_data(), call->sums[j].byte_size());
        }
      }
      call->done(graph::Status());
    });
  });
}

Expected<std::vector<TensorType>> infer_peer_all_reduce(const InferContext& ctx) {
  if (ctx.attr<std::string>("group").empty()) return ctx.error("group must name the all-reduce every rank takes part in");
  const int64_t ranks = ctx.attr<int64_t>("ranks"), rank = ctx.attr<int64_t>("rank");
  if (ranks < 1 || ranks > kMaxRanks) return ctx.error("ranks must be in [1, 4096]");
  if (rank < 0 || rank >= ranks) return ctx.error("rank must be in [0, ranks)");
  if (ctx.attr<int64_t>("timeout_ms") < 0) return ctx.error("timeout_ms must not be negative (0: no deadline)");
  const std::string& reduction = ctx.attr<std::string>("reduction");
  if (reduction != "sum" && reduction != "mean") return ctx.error("reduction must be sum or mean");
  std::vector<TensorType> outputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (t.dtype != DType::f32 && t.dtype != DType::f64 && t.dtype != DType::bf16) {
      return ctx.error("all-reduce takes f32, f64 or bf16");
    }
    outputs.push_back(t);
  }
  return outputs;
}

}  // namespace

void register_peer_all_reduce_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{
      .name = "PeerAllReduce",
      .inputs = {"values"},
      .variadic = true,
      .attrs = {{"group", AttrType::string, {}},
                {"rank", AttrType::integer, {}},
                {"ranks", AttrType::integer, {}},
                {"reduction", AttrType::string, std::string("sum")},
                {"implementation", AttrType::string, std::string(CollectiveOptions{}.implementation)},
                {"timeout_ms", AttrType::integer, CollectiveOptions{}.timeout_ms}},
      .traits = graph::kCollective,
      .infer = infer_peer_all_reduce,
      .summary = "Rank `rank` of `ranks` devices in all-reduce `group`: output j is the sum (or mean) of every "
                 "rank's values[j], in this device's memory; every rank receives the same bits.",
      .no_gradient = "it aggregates gradients, after differentiation"});
  kernels.add("PeerAllReduce", graph::DeviceKind::cpu,
              {.expensive = true, .reuses_inputs = true, .async_fn = peer_all_reduce_kernel});
}

std::vector<graph::ValueRef> peer_all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                             const PeerRank& rank, std::string_view reduction,
                                             const CollectiveOptions& options) {
  const graph::NodeId id = b.add({.op = "PeerAllReduce",
                                  .inputs = values,
                                  .attrs = {{"group", rank.group},
                                            {"rank", rank.rank},
                                            {"ranks", rank.ranks},
                                            {"reduction", std::string(reduction)},
                                            {"implementation", options.implementation},
                                            {"timeout_ms", options.timeout_ms}}});
  std::vector<graph::ValueRef> outputs(values.size());
  if (id == graph::kInvalidNode) return outputs;
  for (size_t i = 0; i < values.size(); ++i) outputs[i] = {id, static_cast<uint16_t>(i)};
  return outputs;
}

}  // namespace mirra::ops
