// MemoryBudget: a compare-and-swap reservation; format_bytes.
#include "runtime/memory_budget.h"

#include <cstdio>
#include <iterator>

namespace mirra::runtime {

bool MemoryBudget::reserve(int64_t bytes) {
  int64_t current = reserved_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - current) return false;
  } while (!reserved_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  return true;
}

std::string format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  auto value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace mirra::runtime
