// register_builtin_ops and the process-wide built-in tables.
#include "ops/registry.h"

#include "ops/op_families.h"
#if MIRRA_WITH_CUDA
#include "ops/cuda/cuda_kernels.h"
#endif

namespace mirra::ops {

void register_builtin_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels) {
  register_source_ops(schemas, kernels);
  register_unary_ops(schemas, kernels);
  register_check_numerics_ops(schemas, kernels);
  register_loss_scale_ops(schemas, kernels);
  register_binary_ops(schemas, kernels);
  register_select_ops(schemas, kernels);
  register_matmul_ops(schemas, kernels);
  register_batch_matmul_ops(schemas, kernels);
  register_gather_ops(schemas, kernels);
  register_layer_norm_ops(schemas, kernels);
  register_dropout_ops(schemas, kernels);
  register_attention_ops(schemas, kernels);
  register_softmax_ops(schemas, kernels);
  register_conv_ops(schemas, kernels);
  register_pool_ops(schemas, kernels);
  register_batch_norm_ops(schemas, kernels);
  register_array_ops(schemas, kernels);
  register_slicing_ops(schemas, kernels);
  register_reduce_ops(schemas, kernels);
  register_optimizer_ops(schemas, kernels);
  register_sparse_optimizer_ops(schemas, kernels);
  register_distribute_ops(schemas, kernels);
  register_collective_ops(schemas, kernels);
  register_copy_ops(schemas, kernels);
#if MIRRA_WITH_CUDA
  register_cuda_kernels(kernels);
#endif
}

namespace {

struct BuiltinTables {
  graph::OpRegistry schemas;
  runtime::KernelRegistry kernels;
  BuiltinTables() { register_builtin_ops(schemas, kernels); }
};

const BuiltinTables& builtin_tables() {
  static const BuiltinTables tables;
  return tables;
}

}  // namespace

const graph::OpRegistry& registry() { return builtin_tables().schemas; }
const runtime::KernelRegistry& kernels() { return builtin_tables().kernels; }

}  // namespace mirra::ops
