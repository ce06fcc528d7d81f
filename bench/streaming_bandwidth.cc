// add_inplace_gbps: the membw peer's in-place loop, one contiguous share per plain thread.
#include "bench/streaming_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "graph/check.h"

namespace mirra::bench {

double add_inplace_gbps(int threads, int repetitions, int64_t working_set_bytes) {
  const size_t n = std::max<size_t>(static_cast<size_t>(working_set_bytes) / 2 / sizeof(float), 1);
  const size_t parts = static_cast<size_t>(threads);
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  double best = 0;
  for (int rep = 0; rep < std::max(repetitions, 10) + 1; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (size_t t = 0; t < parts; ++t) {
      workers.emplace_back([&, t] {
        float* __restrict x = a.data();
        const float* __restrict y = b.data();
        for (size_t i = n * t / parts; i < n * (t + 1) / parts; ++i) x[i] += y[i];
      });
    }
    for (std::thread& worker : workers) worker.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::max(best, 12.0 * static_cast<double>(n) / seconds / 1e9);  // the first touches pages
  }
  MIRRA_CHECK(a[n / 2] > 0, "the loop ran");
  return best;
}

}  // namespace mirra::bench
