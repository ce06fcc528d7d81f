// Random: a small, seeded, portable random generator (xoshiro256** seeded through splitmix64), with
// its own uniform and normal draws, so the same seed gives the same numbers with any compiler or
// standard library (std:: distributions do not promise that).
#pragma once

#include <cmath>
#include <cstdint>

namespace mirra::runtime {

class Random {
 public:
  explicit Random(uint64_t seed) {
    for (uint64_t& word : state_) {
      seed += 0x9E3779B97F4A7C15ull;
      word = mix(seed);
    }
  }

  // splitmix64's finaliser: a well-mixed word from any word (seeds derived from several numbers).
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-64 * n).
  uint64_t below(uint64_t n) {
    __extension__ using uint128 = unsigned __int128;
    return static_cast<uint64_t>((static_cast<uint128>(next()) * n) >> 64);
  }
  // Standard normal (Box-Muller; one draw per call, the pair's second half discarded for simplicity).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace mirra::runtime
