// Lost writes are reported on open: batches acknowledged and then lost with a
// damaged, truncated or deleted write-ahead log are named (the index file
// covered sequence N, the store has M), and the index is rebuilt from the
// records that remain.
//
// Closing the database does not flush RocksDB's memtables (the log is
// enough), so the last session's batches live only in the log; opening the
// database flushes the recovered log into a table. Session 1 commits batch 1,
// session 2 (after that flush) batches 2 and 3: damaging the log then loses
// only batches 2 and 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::RandomBatch;
using testing::StatsOf;
using testing::TempDir;

constexpr int64_t kBatchItems = 60;
constexpr int kDim = 8;

CollectionSpec Spec() { return MakeSpec("c", Kind::kGaussian, kDim, "Flat"); }

// Three batches of kBatchItems (ids 0..179), the last two only in the log.
void IngestThreeBatches(const std::string& dir) {
  {
    std::unique_ptr<DB> db = testing::OpenDb(dir);
    ASSERT_TRUE(db->CreateCollection(Spec()).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(Spec(), kBatchItems, 0, 1).ingest(), nullptr).ok());
  }
  std::unique_ptr<DB> db = testing::OpenDb(dir);
  for (int64_t b = 1; b < 3; ++b) {
    testing::Batch batch = RandomBatch(Spec(), kBatchItems, b * kBatchItems, uint64_t(b + 1));
    ASSERT_TRUE(db->Ingest("c", batch.ingest(), nullptr).ok());
  }
  EXPECT_EQ(StatsOf(db.get(), "c").sequence, 3u);
}  // closing saves the index file as covering sequence 3

// The store's write-ahead log files, oldest first.
std::vector<std::string> LogFiles(const std::string& dir) {
  std::vector<std::string> logs;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/store")) {
    if (e.path().extension() == ".log") logs.push_back(e.path().string());
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

// Reopens, expects the loss of batches store_has+1..3 to be reported, and
// the collection (records, index, search) to hold exactly batches 1..store_has.
void ExpectLoss(const std::string& dir, uint64_t store_has) {
  std::vector<std::string> warnings;
  Options options;
  options.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  std::unique_ptr<DB> db = testing::OpenDb(dir, options);
  ASSERT_TRUE(db);
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.sequence, store_has);
  EXPECT_EQ(st.items, int64_t(store_has) * kBatchItems);
  const std::string expected =
      "collection 'c': lost writes: the index file covered sequence 3, "
      "the store has " +
      std::to_string(store_has);
  EXPECT_EQ(st.lost_writes.rfind(expected, 0), 0u) << st.lost_writes << " / " << st.index_note;
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], st.lost_writes);
  // Never an index with items the store lacks.
  EXPECT_EQ(st.index_vectors, st.items);
  EXPECT_EQ(st.index_sequence, store_has);

  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 3 * kBatchItems; ++i) ids.push_back(i);
  std::vector<Record> recs;
  ASSERT_TRUE(db->Get("c", ids.data(), ids.size(), &recs).ok());
  for (int64_t i = 0; i < 3 * kBatchItems; ++i) {
    EXPECT_EQ(recs[i].found, i < int64_t(store_has) * kBatchItems) << i;
  }
  SearchOptions so;
  so.k = 3 * kBatchItems;
  std::vector<SearchResult> results;
  ASSERT_TRUE(db->Search("c", testing::QueryBatch(Spec(), 1, 9).view(), so, &results).ok());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(int64_t(results[0].hits.size()), st.items);
  for (const SearchHit& hit : results[0].hits) EXPECT_LT(hit.id, int64_t(store_has) * kBatchItems);
  db.reset();

  // Reported on the open that found it; the rebuilt index is saved, so the
  // next open is quiet.
  warnings.clear();
  db = testing::OpenDb(dir, options);
  EXPECT_EQ(StatsOf(db.get(), "c").lost_writes, "");
  EXPECT_TRUE(warnings.empty());
}

// A database with three batches, the last two only in the log (logs_).
class WalLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IngestThreeBatches(dir_.path());
    logs_ = LogFiles(dir_.path());
    ASSERT_FALSE(logs_.empty());
  }
  TempDir dir_;
  std::vector<std::string> logs_;
};

TEST_F(WalLossTest, DeletedLogIsReportedWithTheSequenceNumbers) {
  for (const std::string& log : logs_) std::filesystem::remove(log);
  ExpectLoss(dir_.path(), 1);
}

TEST_F(WalLossTest, TruncatedLogIsReportedWithTheSequenceNumbers) {
  // Batches 2 and 3 are the same size: 3/4 of the log is inside batch 3.
  const auto size = std::filesystem::file_size(logs_.back());
  std::filesystem::resize_file(logs_.back(), size * 3 / 4);
  ExpectLoss(dir_.path(), 2);
}

TEST_F(WalLossTest, CorruptRecordInTheMiddleOfTheLogIsReported) {
  // 1/4 of the log is inside batch 2: replay stops there, batch 3 (intact)
  // is dropped with it, so the store stays a prefix of its batches.
  std::fstream f(logs_.back(), std::ios::in | std::ios::out | std::ios::binary);
  const auto size = std::filesystem::file_size(logs_.back());
  f.seekg(std::streamoff(size / 4));
  char byte = 0;
  f.read(&byte, 1);
  byte = char(~byte);
  f.seekp(std::streamoff(size / 4));
  f.write(&byte, 1);
  f.close();
  ExpectLoss(dir_.path(), 1);
}

TEST(WalLossCollectionTest, LostCollectionIsReportedByItsIndexFile) {
  TempDir dir;
  {
    std::unique_ptr<DB> db = testing::OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(Spec()).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(Spec(), kBatchItems, 0, 1).ingest(), nullptr).ok());
  }
  ASSERT_TRUE(std::filesystem::exists(dir.path() + "/index/1.hidx"));
  for (const std::string& log : LogFiles(dir.path())) std::filesystem::remove(log);

  std::vector<std::string> warnings;
  Options options;
  options.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  std::unique_ptr<DB> db = testing::OpenDb(dir.path(), options);
  ASSERT_TRUE(db);
  std::vector<std::string> names;
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_TRUE(names.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("index/1.hidx belongs to collection id 1"), std::string::npos)
      << warnings[0];
  // The name can be used again; the old file is not taken for the new one.
  ASSERT_TRUE(db->CreateCollection(Spec()).ok());
  EXPECT_EQ(StatsOf(db.get(), "c").items, 0);
  EXPECT_EQ(StatsOf(db.get(), "c").lost_writes, "");
}

// Also: a Flat index file is loaded, not rebuilt (faiss::read_index returns
// the factory's IndexFlat as IndexFlatL2).
TEST_F(WalLossTest, CleanReopenReportsNothing) {
  std::vector<std::string> warnings;
  Options options;
  options.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  std::unique_ptr<DB> db = testing::OpenDb(dir_.path(), options);
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.sequence, 3u);
  EXPECT_EQ(st.index_note, "");
  EXPECT_EQ(st.lost_writes, "");
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace hedgedb
