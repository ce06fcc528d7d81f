// MIRRA_CHECK: the one way mirra stops on a broken internal invariant (never for bad user input,
// which gets a Status). It prints where and what, then aborts, in every build type.
#pragma once

#include <string_view>

namespace mirra::graph::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition, std::string_view message);
}  // namespace mirra::graph::detail

#define MIRRA_CHECK(condition, ...)                                                              \
  do {                                                                                           \
    if (!(condition)) [[unlikely]]                                                               \
      ::mirra::graph::detail::check_failed(__FILE__, __LINE__, #condition,                       \
                                           ::std::string_view{__VA_OPT__(__VA_ARGS__)});         \
  } while (0)
