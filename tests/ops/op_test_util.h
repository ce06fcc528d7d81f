// Helpers for kernel tests: random tensors, running one op through a real Session, comparing with a
// reference computed by plain loops, and the record of which ops were checked (op_coverage_main.cc
// fails the run when a registered op was never checked). The dtype sweep (check_op_at_every_dtype)
// runs an op's cases at every dtype its schema accepts against a reference computed from those very
// inputs, so a schema that accepts a dtype its kernel mishandles fails; coverage fails for an op never
// swept. It is also the backend conformance harness: check_op runs every case on each device kind
// under test too (backends_under_test) and compares its outputs with the CPU kernel's, within the
// case's tolerance; check_gradient does the same for the gradient; coverage is kept per device kind,
// and an op without a kernel on a backend under test fails the coverage check.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <map>
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
// The signatures ("Conv2D(f64, f64)": the op and its inputs' dtypes) check_op ran on `kind`, and those
// whose node soft placement moved to the CPU (dtypes the kind's kernel does not take).
std::set<std::string>& conformance_ran(graph::DeviceKind kind);
std::set<std::string>& conformance_fell_back(graph::DeviceKind kind);
// Every output of `got` (run on `kind`) within `tolerance` of the CPU kernel's `want` (relative to
// max(1, |want|); non-floats exactly), recording `what` as checked on `kind`.
void check_conformance(graph::DeviceKind kind, const std::string& what, const std::vector<Tensor>& got,
                       const std::vector<Tensor>& want, double tolerance);
// Whether `got` has `want`'s dtype and shape and every element within `tolerance` of want's (relative
// to max(1, |want|); non-floats exactly); fails at the first that is not.
void check_elements(const Tensor& got, const Tensor& want, double tolerance);
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
// graph) on `device`. The first `variables` inputs are instead Variables holding those values (the
// state an update writes): their values after the node ran follow its outputs. `placed`, when given,
// receives the kind of device the node ran on.
graph::Expected<std::vector<Tensor>> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                                            const AttrMap& attrs = {}, bool unknown_batch = false,
                                            graph::DeviceId device = {}, size_t variables = 0,
                                            graph::DeviceKind* placed = nullptr);

// Runs `op` and checks every output against `expected` (same dtype and shape; floats within
// `tolerance`, relative to max(1, |expected|); others exactly), with known and unknown batch dims;
// then on every backend under test against the CPU kernel's outputs, within `backend_tolerance`
// where a backend may round differently (the GPU's 16-bit convolutions), else `tolerance`. An output
// in an input's memory fails unless the op's schema has kForwardsInput, and what the schema declares
// for passes (moves_values, reads_only_shape, updates) must hold on the case. With `variables`, as
// run_op: `expected` then also holds those variables' values after the node ran.
void check_op(const std::string& op, const std::vector<Tensor>& inputs, const AttrMap& attrs,
              const std::vector<Tensor>& expected, double tolerance = 1e-5,
              std::optional<double> backend_tolerance = std::nullopt, size_t variables = 0);

// ---- The dtype sweep ----

// Every dtype a tensor holds.
inline constexpr DType kAllDtypes[] = {DType::f32,     DType::f64, DType::i32,  DType::i64,
                                       DType::u8,      DType::boolean, DType::bf16, DType::f16};

// Random values of `dtype` in [low, high): floats uniform (rounded to the dtype), integers uniform over
// the whole numbers of the range (from 0 for u8), bools either value.
Tensor random_of(runtime::Random& rng, DType dtype, const TensorShape& shape, double low = -1.0, double high = 1.0);

// What a sweep's case of `dtype` allows, relative to max(1, |expected|), unless the case says: a few of
// the dtype's roundings for floats (0 for the others, which compare exactly).
double dtype_tolerance(DType dtype);

// One case of an op at one dtype: inputs (and attributes) of that dtype where the op is generic over
// it, and the reference's outputs computed from those very inputs.
struct OpCase {
  std::vector<Tensor> inputs;
  AttrMap attrs;
  std::vector<Tensor> expected;
  std::optional<double> tolerance;          // default: dtype_tolerance of the dtype swept
  std::optional<double> backend_tolerance;  // as check_op's
  size_t variables = 0;                     // as check_op's
};

// Whether `op`'s schema accepts a node reading `inputs` (the first `variables` from Variables) with
// `attrs`.
bool schema_accepts(const std::string& op, const std::vector<graph::TensorType>& inputs, const AttrMap& attrs,
                    size_t variables = 0);

// The dtype sweep: for each of kAllDtypes, make(dtype) builds a case; where the op's schema accepts
// it, check_op checks it against its reference (on every backend under test too) and the dtype is
// recorded as swept; a case the schema refuses is skipped. Fails when the schema accepts none.
void check_op_at_every_dtype(const std::string& op, const std::function<OpCase(DType)>& make);

// The same for ops check_op cannot run (a Placeholder, which the case would feed): node(dtype) gives
// the node's input types and attributes, and check(dtype) checks it where the schema accepts them.
void sweep_dtypes(const std::string& op, const std::function<std::pair<std::vector<graph::TensorType>, AttrMap>(DType)>& node,
                  const std::function<void(DType)>& check);

// The dtypes each op was swept at.
std::map<std::string, std::set<DType>>& swept_dtypes();

// Row-major index helpers for reference loops.
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims);
int64_t ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims);

// Reads element i of any tensor as a double (for references written once for every dtype).
double element(const Tensor& t, int64_t i);
// A tensor of `dtype` and `shape` whose element i is f(i) (rounded to nearest for 16-bit floats,
// truncated and saturated for integers).
Tensor make_tensor(DType dtype, const TensorShape& shape, const std::function<double(int64_t)>& f);
// `t`'s values in `dtype` (rounded to the nearest, ties to even, when narrower).
Tensor as_dtype(const Tensor& t, DType dtype);

}  // namespace mirra::test
