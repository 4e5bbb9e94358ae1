// The coarse index file header (index/index_file.h), without FAISS: every
// check Load runs before the blob reaches faiss::read_index.
#include "index/index_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace hedgedb {
namespace index {
namespace {

const std::string kBlob = "faiss bytes";

Status Check(const std::string& file, uint64_t binding, IndexFileHeader* parsed) {
  const std::string header = file.substr(0, std::min(file.size(), kIndexHeaderBytes));
  HEDGEDB_RETURN_IF_ERROR(ParseIndexFileHeader(header, file.size(), "x.hidx", parsed));
  return CheckIndexFileBlob(header, *parsed, std::string_view(file).substr(kIndexHeaderBytes),
                            binding, "x.hidx");
}

TEST(IndexFileTest, RoundTripsItsFields) {
  const std::string file = EncodeIndexFileHeader(9500, 12, 77, kBlob) + kBlob;
  IndexFileHeader parsed;
  ASSERT_TRUE(Check(file, 77, &parsed).ok());
  EXPECT_EQ(parsed.version, kIndexFileVersion);
  EXPECT_EQ(parsed.recall_bp, 9500u);
  EXPECT_EQ(parsed.sequence, 12u);
  EXPECT_EQ(parsed.binding, 77u);
  EXPECT_EQ(parsed.blob_bytes, kBlob.size());
}

TEST(IndexFileTest, RefusesDamagedFilesNamingTheProblem) {
  const std::string good = EncodeIndexFileHeader(kUnknownRecall, 1, 5, kBlob) + kBlob;
  IndexFileHeader parsed;
  auto expect = [&](const std::string& file, uint64_t binding, const std::string& needle) {
    const Status s = Check(file, binding, &parsed);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find("x.hidx"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  expect(good.substr(0, 10), 5, "bad header");
  std::string bad = good;
  bad[0] = 'X';
  expect(bad, 5, "bad header");
  bad = good;
  bad[8] = 1;
  expect(bad, 5, "format version 1");
  expect(good + "z", 5, "trailing bytes");
  expect(good.substr(0, good.size() - 1), 5, "truncated");
  bad = good;
  bad.back() ^= 1;
  expect(bad, 5, "checksum");
  expect(good, 6, "binding mismatch");
}

// An upkeep record with every field away from its default, so that a
// writer or reader that drops or mixes up any field changes what comes back.
IndexUpkeep EveryField() {
  IndexUpkeep u;
  u.changes_since_check = 4321;
  u.checked_sequence = 17;
  u.checked_time = 1790000000;
  u.checked_recall = 0.962;
  u.retrained_sequence = 15;
  u.retrained_time = 1780000000;
  u.retrains = 3;
  u.fitted_knob = 16;
  u.fitted_recall = 0.991;
  u.retrain_reason = "recall estimate 0.900 < 0.970";
  u.note = "checked at sequence 17";
  u.coarse_recall = 0.8712;
  u.oversampling = 40;
  u.fitted_imbalance = 1.234;
  u.checked_imbalance = 2.5;
  u.fitted_items = 123456;
  return u;
}

// The fields EqualUpkeepFields finds different, for a failure message.
std::string Differing(const IndexUpkeep& a, const IndexUpkeep& b) {
  const uint32_t equal = EqualUpkeepFields(a, b);
  std::string fields;
  for (int i = 0; i < kIndexUpkeepFields; ++i) {
    if (!(equal >> i & 1)) fields += " " + std::to_string(i);
  }
  return "fields (in declaration order) that differ:" + fields;
}

// The equality the round trips use compares every field: each one's bit
// answers to a difference in it, doubles as their bits.
TEST(IndexFileTest, UpkeepEqualityComparesEveryField) {
  const IndexUpkeep all = EveryField();
  EXPECT_EQ(EqualUpkeepFields(all, IndexUpkeep()), 0u) << Differing(all, IndexUpkeep());
  EXPECT_TRUE(all == all);
  EXPECT_TRUE(IndexUpkeep() == IndexUpkeep());  // NaN, "not measured", equals itself
  EXPECT_FALSE(all == IndexUpkeep());
  IndexUpkeep other = all;
  other.fitted_items = 7;  // the last field
  EXPECT_EQ(EqualUpkeepFields(all, other), (1u << (kIndexUpkeepFields - 1)) - 1);
  other = all;
  other.checked_recall = -0.0;
  IndexUpkeep zero = all;
  zero.checked_recall = 0.0;
  EXPECT_TRUE(zero != other);  // the record keeps the sign of zero
}

// Version 3 carries the upkeep record ahead of the FAISS blob; version 2
// files (no record) still pass every check and split into no record and
// the blob. The record reads back every field it was written with.
TEST(IndexFileTest, SplitsTheUpkeepRecordAndReadsVersionTwo) {
  const IndexUpkeep u = EveryField();
  const std::string payload = EncodeUpkeepPrefix(EncodeIndexUpkeep(u)) + kBlob;
  const std::string file = EncodeIndexFileHeader(9500, 17, 77, payload) + payload;
  IndexFileHeader parsed;
  ASSERT_TRUE(Check(file, 77, &parsed).ok());
  EXPECT_EQ(parsed.version, 3u);
  std::string_view record, blob;
  ASSERT_TRUE(SplitIndexPayload(parsed, payload, "x.hidx", &record, &blob).ok());
  EXPECT_EQ(blob, kBlob);
  IndexUpkeep back;
  ASSERT_TRUE(DecodeIndexUpkeep(record, "x.hidx", &back).ok());
  EXPECT_TRUE(back == u) << Differing(back, u);
  // The defaults (NaN recalls, no strings) too.
  ASSERT_TRUE(DecodeIndexUpkeep(EncodeIndexUpkeep(IndexUpkeep()), "x.hidx", &back).ok());
  EXPECT_TRUE(back == IndexUpkeep()) << Differing(back, IndexUpkeep());
  // A later record version appends fields: the known ones are read.
  ASSERT_TRUE(DecodeIndexUpkeep(std::string(record) + "more", "x.hidx", &back).ok());
  EXPECT_TRUE(back == u) << Differing(back, u);
  // Damage the CRC cannot see (a writer's bug) is refused, not read past.
  for (size_t cut : {size_t(0), size_t(3), record.size() - 1}) {
    const Status s = DecodeIndexUpkeep(record.substr(0, cut), "x.hidx", &back);
    EXPECT_TRUE(s.IsCorruption()) << cut << ": " << s.ToString();
  }
  std::string overlong = payload;
  overlong[2] = char(0x7F);  // a record length past the payload
  EXPECT_TRUE(SplitIndexPayload(parsed, overlong, "x.hidx", &record, &blob).IsCorruption());
  EXPECT_TRUE(SplitIndexPayload(parsed, "ab", "x.hidx", &record, &blob).IsCorruption());

  // A record of version 2 ends after the imbalances: read, with no
  // fitted_items (0, unknown).
  std::string v2 = std::string(record.substr(0, record.size() - 8));
  v2[0] = 2;
  ASSERT_TRUE(DecodeIndexUpkeep(v2, "x.hidx", &back).ok());
  IndexUpkeep expected = u;
  expected.fitted_items = 0;
  EXPECT_TRUE(back == expected) << Differing(back, expected);
  // A record of version 1 ends after oversampling: read, with no imbalances.
  std::string v1 = std::string(record.substr(0, record.size() - 24));
  v1[0] = 1;
  ASSERT_TRUE(DecodeIndexUpkeep(v1, "x.hidx", &back).ok());
  expected.fitted_imbalance = expected.checked_imbalance = IndexUpkeep().fitted_imbalance;
  EXPECT_TRUE(back == expected) << Differing(back, expected);
  // A version-2 record must hold the imbalances, a version-3 one
  // fitted_items, and a damaged one is refused.
  EXPECT_TRUE(
      DecodeIndexUpkeep(std::string(v2.substr(0, v2.size() - 8)), "x.hidx", &back).IsCorruption());
  EXPECT_TRUE(DecodeIndexUpkeep(std::string(record.substr(0, record.size() - 4)), "x.hidx", &back)
                  .IsCorruption());
  IndexUpkeep negative = u;
  negative.fitted_imbalance = -1;
  EXPECT_TRUE(DecodeIndexUpkeep(EncodeIndexUpkeep(negative), "x.hidx", &back).IsCorruption());
  negative = u;
  negative.fitted_items = -5;
  EXPECT_TRUE(DecodeIndexUpkeep(EncodeIndexUpkeep(negative), "x.hidx", &back).IsCorruption());

  const std::string old = EncodeIndexFileHeader(9500, 12, 77, kBlob, 2) + kBlob;
  ASSERT_TRUE(Check(old, 77, &parsed).ok());
  EXPECT_EQ(parsed.version, 2u);
  ASSERT_TRUE(SplitIndexPayload(parsed, kBlob, "x.hidx", &record, &blob).ok());
  EXPECT_TRUE(record.empty());
  EXPECT_EQ(blob, kBlob);
}

}  // namespace
}  // namespace index
}  // namespace hedgedb
