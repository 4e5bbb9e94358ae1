// The float16 and bfloat16 conversions of compact rows (common/half.h),
// against definitions computed in double: every 16-bit pattern widens to the
// value its fields define; every float32 that rounds (the patterns' own
// values, the midpoints between neighbours, and a value just either side of
// each midpoint) narrows to the nearest pattern, ties to even. NumPy's
// np.float16 checks the same bits from Python (tests/python/test_row_format.py).
#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/row_layout.h"

namespace hedgedb {
namespace {

// The value of float16 bits h, from the definition.
double HalfValue(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (e == 0) return sign * std::ldexp(double(m), -24);
  return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}

TEST(HalfTest, EveryFloat16WidensToItsValueAndNarrowsBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double want = HalfValue(uint16_t(h));
    const float got = HalfToFloat(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(got)))) << h;
      continue;
    }
    ASSERT_EQ(double(got), want) << h;
    ASSERT_EQ(FloatToHalf(got), uint16_t(h)) << h;  // -0 stays -0
  }
}

TEST(HalfTest, Float16RoundsToNearestTiesToEven) {
  // Between each pair of neighbouring non-negative finite float16s a and b:
  // the midpoint goes to the even one, a float just below it to a, just
  // above it to b. Midpoints of float16s are exact float32s.
  for (uint16_t a = 0; a < 0x7bff; ++a) {
    const uint16_t b = uint16_t(a + 1);
    const float mid = float((HalfValue(a) + HalfValue(b)) / 2);
    ASSERT_EQ(double(mid), (HalfValue(a) + HalfValue(b)) / 2);
    ASSERT_EQ(FloatToHalf(mid), (a & 1) ? b : a) << a;
    ASSERT_EQ(FloatToHalf(std::nextafter(mid, 0.0f)), a) << a;
    ASSERT_EQ(FloatToHalf(std::nextafter(mid, HUGE_VALF)), b) << a;
    ASSERT_EQ(FloatToHalf(-mid), uint16_t(0x8000 | ((a & 1) ? b : a))) << a;
  }
  // Past the largest finite value (65504): 65520 is the midpoint to 2^16,
  // which rounds to the even side, infinity.
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(1e30f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-HUGE_VALF), 0xfc00);
  // Below half the smallest subnormal (2^-25): 0; 2^-25 itself is a tie to 0.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 1);
  EXPECT_EQ(FloatToHalf(1e-30f), 0);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfTest, Bfloat16IsTheUpperHalfRoundedToNearestEven) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float value = Bfloat16ToFloat(uint16_t(b));
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    ASSERT_EQ(bits, b << 16);
    if (std::isnan(value)) continue;
    ASSERT_EQ(FloatToBfloat16(value), uint16_t(b));
    if ((b & 0x7fff) >= 0x7f7f) continue;  // the largest finite and beyond
    // The midpoint to the next pattern (away from zero) and its neighbours.
    const float next = Bfloat16ToFloat(uint16_t(b + 1));
    const double mid = (double(value) + double(next)) / 2;
    const float midf = float(mid);
    ASSERT_EQ(double(midf), mid);
    ASSERT_EQ(FloatToBfloat16(midf), (b & 1) ? uint16_t(b + 1) : uint16_t(b)) << b;
    ASSERT_EQ(FloatToBfloat16(std::nextafter(midf, value)), uint16_t(b)) << b;
    ASSERT_EQ(FloatToBfloat16(std::nextafter(midf, next)), uint16_t(b + 1)) << b;
  }
  EXPECT_TRUE(
      std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies in the low half stays a NaN (not infinity).
  const float low_nan = FloatFromBits(0x7f800001u);
  EXPECT_TRUE(std::isnan(Bfloat16ToFloat(FloatToBfloat16(low_nan))));
}

// Rows: a compact mog row keeps its weights as floats and 2 bytes per other
// value, and widens to the float row of the rounded values.
TEST(HalfTest, CompactRowsNarrowAndWiden) {
  for (RowFormat format : {RowFormat::kFloat16, RowFormat::kBfloat16}) {
    RowShape shape;
    shape.kind = Kind::kMog;
    shape.dim = 3;
    shape.components = 2;
    shape.format = format;
    ASSERT_TRUE(shape.compact());
    EXPECT_EQ(shape.item_row_size(), 14u);
    EXPECT_EQ(shape.item_row_bytes(), 2 * 4 + 12 * 2u);
    const float row[14] = {0.3f,   0.7f, 1.001f, -2.5f, 3e-3f, 0.1f, 7.7f,
                           -1e-5f, 0.5f, 0.25f,  1.1f,  2.2f,  3.3f, 4.4f};
    uint8_t stored[32];
    NarrowItemRow(shape, row, stored);
    float back[14];
    WidenItemRow(shape, stored, back);
    EXPECT_EQ(back[0], 0.3f);  // weights exact
    EXPECT_EQ(back[1], 0.7f);
    for (int j = 2; j < 14; ++j) {
      const float want = format == RowFormat::kFloat16 ? HalfToFloat(FloatToHalf(row[j]))
                                                       : Bfloat16ToFloat(FloatToBfloat16(row[j]));
      EXPECT_EQ(back[j], want) << j;
      EXPECT_LE(std::fabs(double(back[j]) - row[j]),
                std::fabs(row[j]) * (format == RowFormat::kFloat16 ? kFloat16RelativeError
                                                                   : kBfloat16RelativeError) +
                    (format == RowFormat::kFloat16 ? std::ldexp(1.0, -25) : 0.0))
          << j;
    }
  }
  RowShape codes;
  codes.kind = Kind::kCodes;
  codes.dim = 5;
  codes.format = RowFormat::kFloat16;
  EXPECT_FALSE(codes.compact());
  EXPECT_EQ(codes.item_row_bytes(), 5u);
}

}  // namespace
}  // namespace hedgedb
