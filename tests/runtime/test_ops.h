// The op tables of a runtime test: the built-in ops and the test's own, each added as a schema with
// the kernel that serves it on the device kinds it names.
//
//   struct Tables : TestOps {
//     Tables() { add({.name = "TestTwice", .inputs = {"x"}, .infer = infers_input_type()}, {twice_kernel}); }
//   };
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "graph/op_registry.h"
#include "ops/registry.h"
#include "runtime/kernel.h"

namespace mirra::runtime {

struct TestOps {
  graph::OpRegistry schemas;
  KernelRegistry kernels;

  TestOps() { ops::register_builtin_ops(schemas, kernels); }

  // `schema` (summarised as a test op, without a gradient, where it says nothing) with `kernel` on
  // each of `kinds`.
  void add(graph::OpSchema schema, const KernelDef& kernel,
           std::initializer_list<graph::DeviceKind> kinds = {graph::DeviceKind::cpu}) {
    if (schema.summary.empty()) schema.summary = "test op";
    if (schema.no_gradient.empty()) schema.no_gradient = "test op";
    const std::string name = schema.name;
    schemas.add(std::move(schema));
    for (graph::DeviceKind kind : kinds) kernels.add(name, kind, kernel);
  }
};

// An inference rule: one output of type `type`.
inline graph::InferFn infers(graph::TensorType type) {
  return [type](const graph::InferContext&) -> graph::Expected<std::vector<graph::TensorType>> {
    return std::vector<graph::TensorType>{type};
  };
}

// An inference rule: one output of input 0's type.
inline graph::InferFn infers_input_type() {
  return [](const graph::InferContext& ctx) -> graph::Expected<std::vector<graph::TensorType>> {
    return std::vector<graph::TensorType>{ctx.input(0)};
  };
}

}  // namespace mirra::runtime
