// The coarse index file header (index/index_file.h), without FAISS: every
// check Load runs before the blob reaches faiss::read_index.
#include "index/index_file.h"

#include <gtest/gtest.h>

#include <string>

namespace hedgedb {
namespace index {
namespace {

const std::string kBlob = "faiss bytes";

Status Check(const std::string& file, uint64_t binding, IndexFileHeader* parsed) {
  HEDGEDB_RETURN_IF_ERROR(ParseIndexFileHeader(file, file.size(), "x.hidx", parsed));
  const std::string header = file.substr(0, parsed->header_bytes);
  return CheckIndexFileBlob(header, *parsed, std::string_view(file).substr(parsed->header_bytes),
                            binding, "x.hidx");
}

TEST(IndexFileTest, RoundTripsTheFittedCandidatesAndBothRecalls) {
  IndexFileHeader fields;
  fields.recall_bp = 9810;
  fields.coarse_recall_bp = 8712;
  fields.oversampling = 40;
  fields.sequence = 12;
  fields.binding = 77;
  const std::string file = EncodeIndexFileHeader(fields, kBlob) + kBlob;
  IndexFileHeader parsed;
  ASSERT_TRUE(Check(file, 77, &parsed).ok());
  EXPECT_EQ(parsed.version, 3u);
  EXPECT_EQ(parsed.header_bytes, kIndexHeaderBytes);
  EXPECT_EQ(parsed.recall_bp, 9810u);
  EXPECT_EQ(parsed.coarse_recall_bp, 8712u);
  EXPECT_EQ(parsed.oversampling, 40u);
}

// Files written before version 3 (no fitted candidates) still open.
TEST(IndexFileTest, ReadsVersionTwoHeaders) {
  const std::string file = EncodeIndexFileHeaderV2(9500, 12, 77, kBlob) + kBlob;
  ASSERT_EQ(file.size(), kIndexHeaderBytesV2 + kBlob.size());
  IndexFileHeader parsed;
  ASSERT_TRUE(Check(file, 77, &parsed).ok());
  EXPECT_EQ(parsed.version, 2u);
  EXPECT_EQ(parsed.header_bytes, kIndexHeaderBytesV2);
  EXPECT_EQ(parsed.recall_bp, 9500u);
  EXPECT_EQ(parsed.coarse_recall_bp, kUnknownRecall);
  EXPECT_EQ(parsed.oversampling, 0u);
  EXPECT_EQ(parsed.sequence, 12u);
  EXPECT_EQ(parsed.blob_bytes, kBlob.size());
  std::string bad = file;
  bad.back() ^= 1;
  EXPECT_TRUE(Check(bad, 77, &parsed).IsCorruption());
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

}  // namespace
}  // namespace index
}  // namespace hedgedb
