// The executor-overhead benchmark: per-node cost of mirra's executor with trivial kernels (Identity),
// next to a raw oneTBB flow graph of the same shape (one continue_node per node, empty bodies) in the
// same run. Shapes, `nodes` nodes each: a chain, and `width` parallel chains (node i depends on i - width).
#pragma once

#include <nlohmann/json.hpp>

namespace mirra::bench {

struct ExecutorOverheadOptions {
  int nodes = 100000;
  int threads = 2;
  int repetitions = 5;  // the best of these is reported
};

nlohmann::json run_executor_overhead(const ExecutorOverheadOptions& options);

}  // namespace mirra::bench
