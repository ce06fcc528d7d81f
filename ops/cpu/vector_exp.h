// e^x for float in straight-line arithmetic, so that the compiler vectorises the loops that call it
// (a call into the C library's expf keeps a loop scalar). x = n ln 2 + r with |r| <= ln 2 / 2 (n
// rounded by adding 1.5 * 2^23, ln 2 in two parts so that r is exact), e^r by its Taylor polynomial to
// r^7 (error below 5e-9 relative), and 2^n through the exponent bits: within 2 ulp of expf. Results
// below FLT_MIN are 0 (no subnormals), above FLT_MAX infinity; NaN stays NaN.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace mirra::ops::cpu {

inline float vector_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693145751953125f;  // ln 2's leading bits: n * kLn2High is exact
  constexpr float kLn2Low = 1.42860682030941723212e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, in the low bits
  constexpr float kLowest = -87.33654f, kHighest = 88.72283f;  // ln FLT_MIN, ln FLT_MAX
  float clamped = x < kLowest ? kLowest : x;
  clamped = clamped > kHighest ? kHighest : clamped;
  const float shifted = clamped * kLog2e + kRound;
  const int32_t n = static_cast<int32_t>(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRound));
  const float nf = shifted - kRound;
  const float r = (clamped - nf * kLn2High) - nf * kLn2Low;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n as 2^(n >> 1) 2^(n - (n >> 1)): each factor's exponent stays normal for n in [-126, 128].
  const int32_t half = n >> 1;
  const float scale_1 = std::bit_cast<float>(static_cast<uint32_t>(half + 127) << 23);
  const float scale_2 = std::bit_cast<float>(static_cast<uint32_t>(n - half + 127) << 23);
  float value = p * scale_1 * scale_2;
  value = x < kLowest ? 0.0f : value;
  value = x > kHighest ? std::numeric_limits<float>::infinity() : value;
  return x != x ? x : value;
}

}  // namespace mirra::ops::cpu
