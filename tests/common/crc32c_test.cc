#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace hedgedb {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 (iSCSI) test vectors.
  std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cPortableForTest("123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, Crc32IeeeKnownVectorsAndChain) {
  // The CRC-32 check value (zlib's crc32 of "123456789") and of nothing.
  EXPECT_EQ(Crc32Ieee("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(Crc32Ieee("", 0), 0u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32Ieee(zeros.data(), 32), 0x190A55ADu);
  EXPECT_EQ(Crc32Ieee("56789", 5, Crc32Ieee("1234", 4)), 0xCBF43926u);
}

TEST(Crc32cTest, HardwareAndPortableAgreeAndChain) {
  std::mt19937 rng(1);
  std::string data(1000, '\0');
  for (auto& c : data) c = char(rng());
  for (size_t n : {0, 1, 7, 8, 9, 63, 64, 999, 1000}) {
    EXPECT_EQ(Crc32c(data.data(), n), Crc32cPortableForTest(data.data(), n)) << n;
  }
  uint32_t whole = Crc32c(data.data(), 1000);
  uint32_t chained = Crc32c(data.data() + 13, 987, Crc32c(data.data(), 13));
  EXPECT_EQ(whole, chained);
}

}  // namespace
}  // namespace hedgedb
