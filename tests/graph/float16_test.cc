// bfloat16 and float16 (graph/float16.h) against references built from their definitions: every
// 16-bit pattern converts to float and back unchanged (NaNs stay NaN), and a float converts to the
// nearest representable value, ties to the even pattern, found by search over the neighbours in
// double precision; overflow, subnormals, signed zeros, infinities and NaN as IEEE says.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "graph/dtype.h"
#include "runtime/random.h"

namespace mirra::graph {
namespace {

template <class Half>
bool is_nan_bits(uint16_t bits) {
  return std::isnan(static_cast<float>(Half::from_bits(bits)));
}

// The value of `bits` nearest to x (ties: the even pattern) among the candidates given, by exact
// distances in double.
uint16_t nearest(double x, const std::vector<uint16_t>& candidates, double (*value)(uint16_t)) {
  uint16_t best = candidates.front();
  for (uint16_t c : candidates) {
    const double d = std::abs(value(c) - x), e = std::abs(value(best) - x);
    if (d < e || (d == e && (c & 1) == 0)) best = c;
  }
  return best;
}

float bf16_value(uint16_t bits) { return static_cast<float>(bfloat16::from_bits(bits)); }
float f16_value(uint16_t bits) { return static_cast<float>(float16::from_bits(bits)); }
// As candidates, infinity stands where the next power of two would be (IEEE rounds as if the
// exponent had no bound, then overflows).
double bf16_candidate(uint16_t bits) { return (bits & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128) : bf16_value(bits); }
double f16_candidate(uint16_t bits) { return f16_value(bits); }

// float16's reference: the non-negative finite patterns in value order are 0x0000..0x7bff.
uint16_t f16_reference(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::abs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00;  // halfway past the largest finite (65504) and up: infinity
  uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) {  // the largest pattern not above a
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (static_cast<double>(f16_value(mid)) <= a) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
  }
  std::vector<uint16_t> candidates = {lo};
  if (lo < 0x7bff) candidates.push_back(static_cast<uint16_t>(lo + 1));
  return sign | nearest(a, candidates, f16_candidate);
}

// bfloat16's reference: the patterns next to x's truncation.
uint16_t bf16_reference(float x) {
  const uint16_t truncated = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
  const uint16_t sign = truncated & 0x8000;
  const uint16_t magnitude = truncated & 0x7fff;
  std::vector<uint16_t> candidates = {magnitude, static_cast<uint16_t>(magnitude + 1)};
  return sign | nearest(std::abs(static_cast<double>(x)), candidates, bf16_candidate);
}

TEST_CASE("Float16.every_pattern_round_trips_through_float") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    CAPTURE(bits);
    if (is_nan_bits<bfloat16>(b)) {
      CHECK(is_nan_bits<bfloat16>(bfloat16(bf16_value(b)).bits));
    } else {
      CHECK(bfloat16(bf16_value(b)).bits == b);
    }
    if (is_nan_bits<float16>(b)) {
      CHECK(is_nan_bits<float16>(float16(f16_value(b)).bits));
    } else {
      CHECK(float16(f16_value(b)).bits == b);
    }
  }
}

TEST_CASE("Float16.floats_round_to_nearest_ties_to_even") {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 1.0f / 3, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e9f,
                               std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::ldexp(1.0f, -14), std::ldexp(1.0f, -24),
                               std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), std::ldexp(1.0f, -26), 1e-30f,
                               std::numeric_limits<float>::denorm_min(), 1.0f + std::ldexp(1.0f, -8),   // bf16 tie
                               1.0f + std::ldexp(3.0f, -8), 1.0f + std::ldexp(1.0f, -11),              // f16 tie
                               1.0f + std::ldexp(3.0f, -11), 2049.0f, 2051.0f};
  runtime::Random rng(5);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns cover every exponent; the scaled ones crowd f16's range.
    const float scaled = static_cast<float>((rng.uniform() * 2 - 1) * std::ldexp(1.0, static_cast<int>(rng.below(48)) - 30));
    values.push_back(scaled);
    const float any = std::bit_cast<float>(static_cast<uint32_t>(rng.below(uint64_t{1} << 32)));
    if (!std::isnan(any)) values.push_back(any);
  }
  for (float x : values) {
    CAPTURE(x);
    CHECK(bfloat16(x).bits == bf16_reference(x));
    CHECK(float16(x).bits == f16_reference(x));
  }
  CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(static_cast<float>(float16(-std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float16(-0.0f).bits == 0x8000);
  CHECK(float16(65504.0f).bits == 0x7bff);
  CHECK(float16(std::ldexp(1.0f, -24)).bits == 0x0001);  // the smallest subnormal
  CHECK(bfloat16(1.0f / 3).bits == 0x3eab);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_name(DType::f16) == "f16");
  CHECK(is_floating(DType::bf16));
}

}  // namespace
}  // namespace mirra::graph
