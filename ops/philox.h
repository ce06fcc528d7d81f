// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011; the generator of
// TensorFlow's stateless random ops and of cuRAND's Philox): a counter-based generator, so the draw
// for any (key, counter) is computed directly, in any order, on any device, with the same bits. Host
// and device functions under nvcc, so the CPU and GPU dropout kernels draw the same masks.
#pragma once

#include <cstdint>

#include "ops/elementwise_math.h"

namespace mirra::ops::philox {

struct Block {
  uint32_t v[4];
};

// The ten rounds on `counter` under `key` (two 32-bit words).
MIRRA_HOST_DEVICE inline Block philox4x32_10(Block counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * counter.v[0];
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * counter.v[2];
    counter = {{static_cast<uint32_t>(product1 >> 32) ^ counter.v[1] ^ key0, static_cast<uint32_t>(product1),
                static_cast<uint32_t>(product0 >> 32) ^ counter.v[3] ^ key1, static_cast<uint32_t>(product0)}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// A uniform draw in [0, 1) (24 random bits, exact in float) for element `element` of the example
// with key `example`, under `seed`.
MIRRA_HOST_DEVICE inline float uniform(uint64_t seed, uint64_t example, uint64_t element) {
  const Block out = philox4x32_10({{static_cast<uint32_t>(example), static_cast<uint32_t>(example >> 32),
                                    static_cast<uint32_t>(element), static_cast<uint32_t>(element >> 32)}},
                                  static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(out.v[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace mirra::ops::philox
