// with_dnnl_threads: the threads a oneDNN call finds inside, on whichever runtime this build's oneDNN
// parallelises with (an OpenMP team, or a oneTBB arena).
#include <oneapi/tbb/task_arena.h>

#include "ops/cpu/dnnl_engine.h"
#include "tests/ops/op_test_util.h"

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
extern "C" int omp_get_max_threads();
#endif

namespace mirra::test {
namespace {

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP || DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_TBB

// How many threads oneDNN would spread a call made inside with_dnnl_threads(threads) over.
int threads_inside(int threads) {
  int seen = 0;
  ops::cpu::with_dnnl_threads(threads, [&] {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    seen = omp_get_max_threads();
#else
    seen = tbb::this_task_arena::max_concurrency();
#endif
  });
  return seen;
}

TEST_CASE("DnnlThreads.a_call_finds_the_threads_it_is_given") {
  tbb::task_arena device_threads(2);
  device_threads.execute([] {
    CHECK(threads_inside(1) == 1);
    CHECK(threads_inside(2) == 2);
    CHECK(threads_inside(1) == 1);  // again, from the thread's cached setting
  });
}

#endif

}  // namespace
}  // namespace mirra::test
