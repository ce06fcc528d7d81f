// The ops test binary's main: runs every test case, then, on a plain run (no arguments), fails when a
// registered op has no CPU kernel, was never checked against a reference by check_op or was never
// swept over the dtypes its schema accepts (check_op_at_every_dtype), and reports
// the conformance coverage of every backend under test (an op with a kernel there that was never
// checked against the CPU kernel fails too, as does an op without a kernel on a backend under test).
// With the GPU among the backends (MIRRA_CONFORMANCE_BACKENDS=gpu) and no CUDA device, it reports
// itself skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>

#include "ops/registry.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/ops/op_test_util.h"

int main(int argc, char** argv) {
  const auto& backends = mirra::test::backends_under_test();
  if (std::find(backends.begin(), backends.end(), mirra::graph::DeviceKind::gpu) != backends.end()) {
    if (const int skip = mirra::test::skip_without_gpu(); skip >= 0) return skip;
  }
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || result != 0) return result;
  if (argc > 1) return result;  // a filtered or customised run need not cover every op
  int missing = 0;
  for (const std::string& op : mirra::ops::registry().names()) {
    if (mirra::ops::kernels().find(op, mirra::graph::DeviceKind::cpu) == nullptr) {
      std::fprintf(stderr, "op coverage: %s has no CPU kernel\n", op.c_str());
      ++missing;
    }
    const mirra::graph::OpSchema& schema = *mirra::ops::registry().find(op);
    if (static_cast<bool>(schema.gradient) == !schema.no_gradient.empty()) {
      std::fprintf(stderr, "op coverage: %s needs exactly one of a gradient rule and a no_gradient reason\n", op.c_str());
      ++missing;
    }
    if (schema.gradient && mirra::test::gradient_checked_ops().count(op) == 0) {
      std::fprintf(stderr, "op coverage: %s has a gradient rule but no numeric gradient check\n", op.c_str());
      ++missing;
    }
    if (mirra::test::checked_ops().count(op) == 0) {
      std::fprintf(stderr, "op coverage: %s has no kernel test (check_op was never called for it)\n", op.c_str());
      ++missing;
    }
    if (mirra::test::swept_dtypes().count(op) == 0) {
      std::fprintf(stderr, "op coverage: %s was never swept over the dtypes its schema accepts (check_op_at_every_dtype)\n",
                   op.c_str());
      ++missing;
    }
  }
  size_t swept = 0;
  for (const auto& [op, dtypes] : mirra::test::swept_dtypes()) swept += dtypes.size();
  std::printf("op coverage: %zu ops registered, %d missing a kernel, a test, a dtype sweep or a gradient check; "
              "%zu (op, dtype) pairs the schemas accept checked against their references\n",
              mirra::ops::registry().names().size(), missing, swept);
  for (mirra::graph::DeviceKind kind : mirra::test::backends_under_test()) {
    const std::string_view name = mirra::graph::device_kind_name(kind);
    const std::set<std::string>& checked = mirra::test::conformance_checked(kind);
    int matching = 0, gradients = 0, failing = 0;
    for (const std::string& op : mirra::ops::registry().names()) {
      if (mirra::ops::kernels().find(op, kind) == nullptr) {
        std::fprintf(stderr, "conformance: %s has no %.*s kernel\n", op.c_str(), static_cast<int>(name.size()), name.data());
        ++failing;
      } else if (checked.count(op) == 0) {
        std::fprintf(stderr, "conformance: %s's %.*s kernel was never checked against the CPU kernel\n", op.c_str(),
                     static_cast<int>(name.size()), name.data());
        ++failing;
      } else {
        ++matching;
        gradients += static_cast<int>(checked.count(op + " gradient"));
      }
    }
    std::printf("conformance on %.*s: %d of %zu ops have a kernel there that matches the CPU kernel, and %d gradients\n",
                static_cast<int>(name.size()), name.data(), matching, mirra::ops::registry().names().size(), gradients);
    const std::set<std::string>& fell_back = mirra::test::conformance_fell_back(kind);
    std::string refused;
    for (const std::string& signature : fell_back) refused += (refused.empty() ? "" : "; ") + signature;
    std::printf("conformance on %.*s: %zu (op, input dtypes) signatures ran there, %zu on the CPU instead (dtypes its "
                "kernels do not take)%s%s\n",
                static_cast<int>(name.size()), name.data(), mirra::test::conformance_ran(kind).size(), fell_back.size(),
                refused.empty() ? "" : ": ", refused.c_str());
    missing += failing;
  }
  return missing == 0 ? 0 : 1;
}
