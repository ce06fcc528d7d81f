// The streaming-memory peer of the all-reduce benchmark: the best rate of a[i] += b[i] over 64 MiB
// arrays on `threads` plain threads (one contiguous share each), in GB/s counting 12 bytes per element (read a, read b, write a),
// as the membw peer's add_inplace_GBps. Compiled with -O3 -march=native like that peer, so the bound
// is the machine's, not our compiler flags'.
#pragma once

namespace mirra::bench {

double add_inplace_gbps(int threads, int repetitions);

}  // namespace mirra::bench
