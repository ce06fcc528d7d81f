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
    if (mirra::ops::cpu_kernels().find(op, mirra::graph::DeviceKind::cpu) == nullptr) {
      std::fprintf(stderr, "op coverage: %s has no CPU kernel\n", op.c_str());
      ++missing;
    }
    if (mirra::test::checked_ops().count(op) == 0) {
      std::fprintf(stderr, "op coverage: %s has no kernel test (check_op was never called for it)\n", op.c_str());
      ++missing;
    }
  }
  std::printf("op coverage: %zu ops registered, %d missing a kernel or a test\n", mirra::ops::registry().names().size(),
              missing);
  return missing == 0 ? 0 : 1;
}
