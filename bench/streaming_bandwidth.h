// The streaming-memory peer of the all-reduce benchmark: the best rate of a[i] += b[i] over two
// arrays of `working_set_bytes` / 2 each on `threads` plain threads (one contiguous share each), in
// GB/s counting 12 bytes per element (read a, read b, write a), as the membw peer's add_inplace_GBps.
// The working set matters: on a machine whose last-level cache holds hundreds of MiB, a loop over
// 128 MiB runs partly from cache and one over 1 GiB does not, so the bound of an operation is
// measured over as many bytes as the operation touches. Compiled with -O3 -march=native like that
// peer, so the bound is the machine's, not our compiler flags'.
#pragma once

#include <cstdint>

namespace mirra::bench {

double add_inplace_gbps(int threads, int repetitions, int64_t working_set_bytes);

}  // namespace mirra::bench
