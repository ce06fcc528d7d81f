// One registration function per op family (each defined in <family>_ops.cc); register_builtin_ops
// calls them all. Internal to ops/.
#pragma once

#include "graph/op_registry.h"
#include "runtime/kernel.h"

namespace mirra::ops {

void register_source_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_check_numerics_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_loss_scale_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_unary_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_binary_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_select_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_matmul_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_batch_matmul_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_gather_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_layer_norm_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_dropout_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_attention_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_softmax_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_conv_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_batch_norm_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_pool_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_array_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_slicing_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_reduce_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_distribute_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_collective_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_optimizer_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_sparse_optimizer_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);
void register_copy_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);

}  // namespace mirra::ops
