// CopyToHost and CopyFromHost: the copies runtime::insert_copies puts on edges between memory
// spaces (device to host on the producer's device, host to device on the consumer's). Each runs on
// its device's stream, where it may touch host memory because its kernel declares that argument
// host-memory.
#include <cstring>

#include "ops/op_families.h"
#include "runtime/placement.h"

namespace mirra::ops {

using graph::InferContext;
using runtime::KernelContext;
using runtime::Tensor;

namespace {

graph::Status copy_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
  if (x.byte_size() > 0) std::memcpy(y.mutable_raw_data(), x.raw_data(), x.byte_size());
  return graph::Status();
}

graph::Expected<std::vector<graph::TensorType>> infer_copy(const InferContext& ctx) {
  return std::vector<graph::TensorType>{ctx.input(0)};
}

}  // namespace

void register_copy_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  schemas.add(graph::OpSchema{.name = std::string(runtime::kCopyToHostOp),
                              .inputs = {"x"},
                              .infer = infer_copy,
                              .summary = "x, copied from its device's memory into host memory (inserted by placement).",
                              .no_gradient = "copies are inserted after differentiation"});
  kernels.add(runtime::kCopyToHostOp, graph::DeviceKind::cpu, {.fn = copy_kernel, .host_memory_outputs = 1});
  schemas.add(graph::OpSchema{.name = std::string(runtime::kCopyFromHostOp),
                              .inputs = {"x"},
                              .infer = infer_copy,
                              .summary = "x, copied from host memory into its device's memory (inserted by placement).",
                              .no_gradient = "copies are inserted after differentiation"});
  kernels.add(runtime::kCopyFromHostOp, graph::DeviceKind::cpu, {.fn = copy_kernel, .host_memory_inputs = 1});
}

}  // namespace mirra::ops
