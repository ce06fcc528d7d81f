// MemoryBudget: the bytes the allocators of one session may hold from the system together (TF's
// per-device memory limit). An allocation past it, or one the system refuses, throws OutOfMemory,
// which the executor reports as a resource_exhausted error naming the node.
//
//   auto budget = std::make_shared<runtime::MemoryBudget>(int64_t{16} << 30);
//   if (!budget->reserve(bytes)) throw runtime::OutOfMemory("...");
#pragma once

#include <atomic>
#include <cstdint>
#include <new>
#include <string>

namespace mirra::runtime {

class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  // Takes `bytes` from the budget; false (taking nothing) when that would pass the limit.
  bool reserve(int64_t bytes);
  void release(int64_t bytes) { reserved_.fetch_sub(bytes, std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }
  int64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> reserved_{0};
};

// An allocation that could not be served, with what was asked and why.
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// "1.5 GiB"
std::string format_bytes(int64_t bytes);

}  // namespace mirra::runtime
