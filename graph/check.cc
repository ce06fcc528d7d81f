// check_failed: reports a broken invariant and aborts.
#include "graph/check.h"

#include <cstdio>
#include <cstdlib>

namespace mirra::graph::detail {

void check_failed(const char* file, int line, const char* condition, std::string_view message) {
  std::fprintf(stderr, "mirra: internal check failed at %s:%d: %s%s%.*s\n", file, line, condition,
               message.empty() ? "" : ": ", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::abort();
}

}  // namespace mirra::graph::detail
