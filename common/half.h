// The 16-bit number formats of compact item rows (RowFormat,
// hedgedb/collection_spec.h): IEEE 754 binary16 ("float16") and bfloat16,
// converted from float32 with round-to-nearest-even and back exactly.
//
// Integer arithmetic only: a float16 subnormal widened through a float
// multiplication would read as 0 under a denormals-are-zero mode that a
// library in the process may have set. The results are bit-exact against
// NumPy's np.float16 and a bit-manipulation bfloat16 reference
// (tests/python/test_row_format.py, tests/query/row_format_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hedgedb {

// Limits of float16 (the values a collection of that format accepts).
constexpr float kFloat16Max = 65504.0f;
constexpr float kFloat16MinNormal = 6.103515625e-05f;  // 2^-14
constexpr float kFloat16MinPositive = 5.9604644775390625e-08f;  // 2^-24, the smallest subnormal
// Relative rounding error bounds (half a unit in the last place of a
// normal number): float16 2^-11, bfloat16 2^-8.
constexpr double kFloat16RelativeError = 1.0 / 2048;
constexpr double kBfloat16RelativeError = 1.0 / 256;

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Nearest float16, ties to even; beyond the largest finite value (from
// 65520 on) infinity; NaN stays NaN (quiet).
inline uint16_t FloatToHalf(float value) {
  const uint32_t x = FloatBits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520: rounds up to inf
  if (abs >= 0x38800000u) {                                 // a normal float16 (>= 2^-14)
    // Rebias the exponent (127 - 15 = 112) and round 23 mantissa bits to 10;
    // a carry out of the mantissa moves to the next binade, as it should.
    uint32_t m = abs - 0x38000000u;
    m += 0xfffu + ((m >> 13) & 1u);
    return uint16_t(sign | (m >> 13));
  }
  if (abs < 0x33000000u) return uint16_t(sign);  // below 2^-25: rounds to 0
  // A subnormal float16, units of 2^-24: the 24-bit significand shifted
  // right by 126 - exponent (14..24 places), rounded to nearest even.
  const uint32_t exponent = abs >> 23;
  const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return uint16_t(sign | q);
}

// The float16's value, exactly. Every case is computed and one selected by
// masks, without branches, so that a loop over many (HalvesToFloats)
// vectorises at the baseline ISA: 0.4-0.7 ns a value (bench/bench_widen.cc)
// instead of 1.9 with branches or ternaries, which GCC 12 keeps as branches
// (the float multiply may trap, so it is not if-converted); float32's copy
// is 0.1 ns (one core of the AMD EPYC of bench/RESULTS.md, "Compact rows").
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const int32_t rest = int32_t(h & 0x7fffu);
  const uint32_t normal = (uint32_t(rest) << 13) + 0x38000000u;           // rebias the exponent
  const uint32_t special = 0x7f800000u | (uint32_t(rest & 0x3ff) << 13);  // inf, NaN
  // A subnormal is rest x 2^-24, exactly (an integer below 2^10, scaled).
  const uint32_t subnormal = FloatBits(float(rest) * (1.0f / 16777216.0f));
  const uint32_t is_special = 0u - uint32_t(rest >= 0x7c00);  // all ones or 0
  const uint32_t is_subnormal = 0u - uint32_t(rest < 0x400);
  uint32_t bits = (special & is_special) | (normal & ~is_special);
  bits = (subnormal & is_subnormal) | (bits & ~is_subnormal);
  return FloatFromBits(sign | bits);
}

// Nearest bfloat16 (the upper half of a float32), ties to even; NaN stays
// NaN (quiet); values from 3.3961e38 on round to infinity.
inline uint16_t FloatToBfloat16(float value) {
  const uint32_t x = FloatBits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float Bfloat16ToFloat(uint16_t b) { return FloatFromBits(uint32_t(b) << 16); }

// n values each way (loops the compiler vectorises).
inline void HalvesToFloats(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}
inline void Bfloat16sToFloats(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = Bfloat16ToFloat(in[i]);
}

}  // namespace hedgedb
