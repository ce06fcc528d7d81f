// Helpers for kernel tests: random tensors, running one op through a real Session, comparing with a
// reference computed by plain loops, and the record of which ops were checked (op_coverage_main.cc
// fails the run when a registered op was never checked). It is also the backend conformance harness:
// check_op runs every case on each device kind under test too (backends_under_test) and compares its
// outputs with the CPU kernel's, within the case's tolerance; check_gradient does the same for the
// gradient; coverage is kept per device kind, and an op without a kernel on a backend under test
// fails the coverage check.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "ops/ops.h"
#include "runtime/random.h"
#include "runtime/session.h"

namespace mirra::test {

using graph::AttrMap;
using graph::DType;
using runtime::Tensor;
using runtime::TensorShape;

std::set<std::string>& checked_ops();
// Device kinds whose kernels are checked against the CPU kernels: those MIRRA_CONFORMANCE_BACKENDS
// lists ("cpu_async,gpu"), cpu_async by default.
const std::vector<graph::DeviceKind>& backends_under_test();
// A session on a backend under test: its device 0 by default, and the nodes it has no kernel for on
// cpu:0 (a gradient graph may hold such ops; only the op under test must run on the backend).
runtime::SessionOptions backend_session_options(graph::DeviceKind kind);
// Whether `op` has a kernel for `kind`.
bool has_kernel(graph::DeviceKind kind, const std::string& op);
// Ops (and "<op> gradient"s) checked on `kind` against the CPU kernel.
std::set<std::string>& conformance_checked(graph::DeviceKind kind);
// Every output of `got` (run on `kind`) within `tolerance` of the CPU kernel's `want` (relative to
// max(1, |want|); non-floats exactly), recording `what` as checked on `kind`.
void check_conformance(graph::DeviceKind kind, const std::string& what, const std::vector<Tensor>& got,
                       const std::vector<Tensor>& want, double tolerance);
// Ops whose gradient rule gradient_test.cc checked against central differences.
std::set<std::string>& gradient_checked_ops();

// Uniform values in [low, high).
template <class T>
Tensor random_tensor(runtime::Random& rng, const TensorShape& shape, double low = -1.0, double high = 1.0) {
  std::vector<T> values(static_cast<size_t>(shape.num_elements()));
  for (T& v : values) v = static_cast<T>(low + (high - low) * rng.uniform());
  return Tensor::from<T>(shape, std::span<const T>(values));
}

// Runs `op` on `inputs` (fed through placeholders; with `unknown_batch`, dim 0 of input 0 is -1 in the
// graph) on `device`.
graph::Expected<std::vector<Tensor>> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                            const AttrMap& attrs = {}, bool unknown_batch = false,
                                            graph::DeviceId device = {});

// Runs `op` and checks every output against `expected` (same dtype and shape; floats within
// `tolerance`, relative to max(1, |expected|); others exactly), with known and unknown batch dims;
// then on every backend under test against the CPU kernel's outputs, within `backend_tolerance`
// where a backend may round differently (the GPU's 16-bit convolutions), else `tolerance`. An output
// in an input's memory fails unless the op's schema has kForwardsInput.
void check_op(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
              const std::vector<Tensor>& expected, double tolerance = 1e-5,
              std::optional<double> backend_tolerance = std::nullopt);

// Row-major index helpers for reference loops.
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims);
int64_t ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims);

// Reads element i of any tensor as a double (for references written once for every dtype).
double element(const Tensor& t, int64_t i);
// A tensor of `dtype` and `shape` whose element i is f(i).
Tensor make_tensor(DType dtype, const TensorShape& shape, const std::function<double(int64_t)>& f);
// `t`'s values in `dtype` (rounded to the nearest, ties to even, when narrower).
Tensor as_dtype(const Tensor& t, DType dtype);

}  // namespace mirra::test
