// The built-in ops: one schema table (registry) and one kernel table (kernels) holding every device
// kind's kernels (cpu, gpu; cpu_async runs the CPU's, as its kind's registration says), both filled
// explicitly by register_builtin_ops the first time either is asked for. Schemas are registered once; kernels by
// device kind.
//
//   graph::Builder b(g, ops::registry());
//   runtime::Session session(g, ops::kernels());
#pragma once

#include "graph/op_registry.h"
#include "runtime/kernel.h"

namespace mirra::ops {

void register_builtin_ops(graph::OpRegistry& schemas, runtime::KernelRegistry& kernels);

const graph::OpRegistry& registry();
const runtime::KernelRegistry& kernels();

}  // namespace mirra::ops
