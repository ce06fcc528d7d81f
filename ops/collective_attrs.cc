// The checks and lookups every collective op shares (ops/collective_attrs.h).
#include "ops/collective_attrs.h"

namespace mirra::ops {

Status check_collective_attrs(const InferContext& ctx) {
  if (ctx.attr<std::string>("implementation").empty()) return ctx.error("implementation must name a collective");
  if (ctx.attr<int64_t>("timeout_ms") < 0) return ctx.error("timeout_ms must not be negative (0: no deadline)");
  return Status();
}

Expected<runtime::Communicator*> node_communicator(const runtime::KernelContext& ctx) {
  return ctx.communicator(ctx.attr<std::string>("implementation"));
}

runtime::Reduction reduction_of(const runtime::KernelContext& ctx) {
  return ctx.attr<std::string>("reduction") == "mean" ? runtime::Reduction::mean : runtime::Reduction::sum;
}

Status check_reduction(const InferContext& ctx) {
  const std::string& reduction = ctx.attr<std::string>("reduction");
  if (reduction != "sum" && reduction != "mean") return ctx.error("reduction must be sum or mean");
  return Status();
}

Status check_all_reducible(const InferContext& ctx, const TensorType& t) {
  if (t.dtype == graph::DType::f32 || t.dtype == graph::DType::f64 || t.dtype == graph::DType::bf16) return Status();
  return ctx.error("all-reduce takes f32, f64 or bf16");
}

Status check_reduce_scatterable(const InferContext& ctx, const TensorType& t) {
  if (t.dtype == graph::DType::f32 || t.dtype == graph::DType::f64) return Status();
  return ctx.error("reduce-scatter takes f32 or f64");
}

std::vector<graph::ValueRef> outputs_of(graph::NodeId id, size_t count) {
  std::vector<graph::ValueRef> outputs(count);
  if (id == graph::kInvalidNode) return outputs;
  for (size_t i = 0; i < count; ++i) outputs[i] = {id, static_cast<uint16_t>(i)};
  return outputs;
}

}  // namespace mirra::ops
