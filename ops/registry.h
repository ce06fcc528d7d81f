// The built-in ops: one schema table (registry) and one CPU kernel table (cpu_kernels), both filled
// explicitly by register_builtin_ops the first time either is asked for.
//
//   graph::Builder b(g, ops::registry());
//   runtime::Session session(g, ops::cpu_kernels());
#pragma once

#include "graph/op_registry.h"
#include "runtime/kernel.h"

namespace mirra::ops {

void register_builtin_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);

const graph::OpRegistry& registry();
const runtime::KernelRegistry& cpu_kernels();

}  // namespace mirra::ops
