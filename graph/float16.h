// The two 16-bit floating types tensors hold, as their bits: bfloat16 (bf16: float's sign and 8-bit
// exponent, a 7-bit mantissa) and float16 (f16: IEEE binary16, 5-bit exponent, 10-bit mantissa).
// From float they round to nearest, ties to even, as hardware conversions do: a NaN stays a NaN
// (quiet), float16 overflows to infinity and keeps subnormals. To float they are exact.
//
//   const graph::bfloat16 b(1.0f / 3);     // 0.333984375
//   const float back = static_cast<float>(b);
#pragma once

#include <bit>
#include <cstdint>

namespace mirra::graph {

// A 16-bit float as its bits, converted by `Format` (BFloat16Format or Float16Format below).
template <class Format>
struct SixteenBitFloat {
  uint16_t bits = 0;

  SixteenBitFloat() = default;
  explicit SixteenBitFloat(float value) : bits(Format::from_float(value)) {}
  explicit operator float() const { return Format::to_float(bits); }
  static SixteenBitFloat from_bits(uint16_t bits) {
    SixteenBitFloat value;
    value.bits = bits;
    return value;
  }
  friend bool operator==(SixteenBitFloat a, SixteenBitFloat b) { return a.bits == b.bits; }
};

// The conversions from float compute every case and select one, without branches, so that loops
// over them vectorise.
struct BFloat16Format {
  static uint16_t from_float(float value) {
    const uint32_t f = std::bit_cast<uint32_t>(value);
    // Adds half an ulp of the result, less one unless the kept part is odd: ties go to even.
    const uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (f >> 16) | 0x40u;
    return static_cast<uint16_t>((f & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
  static float to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
};

struct Float16Format {
  static uint16_t from_float(float value) {
    const uint32_t f = std::bit_cast<uint32_t>(value);
    const uint32_t sign = (f >> 16) & 0x8000u;
    const uint32_t magnitude = f & 0x7fffffffu;
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits, ties to even.
    const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
    const uint32_t normal = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
    // Below the smallest normal (2^-14): a subnormal, rounded once from the exact value. Adding 0.5
    // puts the value's bits where f16's subnormal mantissa is, and float's own addition rounds to
    // nearest even.
    const float small = std::bit_cast<float>(magnitude & 0x3fffffffu);  // the mask keeps unused lanes finite
    const uint32_t subnormal = std::bit_cast<uint32_t>(small + 0.5f) - 0x3f000000u;
    const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
    uint32_t bits = magnitude < 0x38800000u ? subnormal : normal;
    bits = magnitude >= 0x477ff000u ? 0x7c00u : bits;  // 65520 and up round to infinity
    bits = magnitude > 0x7f800000u ? nan : bits;
    return static_cast<uint16_t>(sign | bits);
  }

  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    const uint32_t normal = ((exponent + 127u - 15u) << 23) | (mantissa << 13);
    const uint32_t special = 0x7f800000u | (mantissa << 13);  // infinity, NaN
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(mantissa) * std::bit_cast<float>(0x33800000u));
    uint32_t bits = exponent == 0x1f ? special : normal;
    bits = exponent == 0 ? subnormal : bits;
    return std::bit_cast<float>(sign | bits);
  }
};

using bfloat16 = SixteenBitFloat<BFloat16Format>;
using float16 = SixteenBitFloat<Float16Format>;

}  // namespace mirra::graph
