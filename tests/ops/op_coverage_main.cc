// The ops test binary's main: runs every test case, then, on a plain run (no arguments), fails when a
// registered op has no CPU kernel or was never checked against a reference by check_op.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "ops/registry.h"
#include "tests/ops/op_test_util.h"

int main(int argc, char** argv) {
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
  }
  std::printf("op coverage: %zu ops registered, %d missing a kernel, a test or a gradient check\n", mirra::ops::registry().names().size(),
              missing);
  return missing == 0 ? 0 : 1;
}
