// A full disk on a real file system (a small tmpfs): ingests until it fills.
// Each failing ingest is an IO error naming the lack of space, the process
// does not abort, and after space is freed the database reopens with every
// acknowledged batch and no part of a failed one. The fault-injecting version
// of this is tests/storage/disk_full_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_test_util.h"
#include "tmpfs_mount.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::RandomBatch;

constexpr int64_t kBatchItems = 100;
constexpr int kDim = 16;

bool SaysNoSpace(const Status& s) {
  return s.ToString().find("No space left on device") != std::string::npos;
}

TEST(DiskFullTmpfsTest, IngestUntilFullThenReopenKeepsEveryAcknowledgedBatch) {
  testing_util::ScopedTmpfs fs;
  const std::string why = fs.Mount("8m");
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string path = fs.path() + "/db";
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, kDim, "Flat");
  int64_t acknowledged = 0;  // batches 0..acknowledged-1 (ids batch * kBatchItems + i)
  {
    std::unique_ptr<DB> db = testing::OpenDb(path);
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    Status failed;
    // 8 MB hold a few hundred batches of 100 x 16 x 2 floats; stop well after.
    for (int64_t batch = 0; batch < 2000; ++batch) {
      testing::Batch b = RandomBatch(spec, kBatchItems, batch * kBatchItems, uint64_t(batch));
      Status s = db->Ingest("c", b.ingest(), nullptr);
      if (!s.ok()) {
        failed = s;
        break;
      }
      acknowledged = batch + 1;
    }
    ASSERT_FALSE(failed.ok()) << "the file system never filled";
    EXPECT_TRUE(failed.IsIOError()) << failed.ToString();
    EXPECT_TRUE(SaysNoSpace(failed)) << failed.ToString();
    ASSERT_GT(acknowledged, 0);
    // Later writes fail too, with a clear error, and do not abort.
    for (int64_t batch = acknowledged; batch < acknowledged + 3; ++batch) {
      testing::Batch b = RandomBatch(spec, kBatchItems, batch * kBatchItems, uint64_t(batch));
      Status s = db->Ingest("c", b.ingest(), nullptr);
      EXPECT_TRUE(s.IsIOError()) << s.ToString();
    }
    // Closing on a full disk (the index file cannot be saved) does not abort.
  }
  ASSERT_TRUE(fs.Resize("64m"));  // space is back
  std::unique_ptr<DB> db = testing::OpenDb(path);
  ASSERT_TRUE(db);
  CollectionStats st = testing::StatsOf(db.get(), "c");
  // Every acknowledged batch; the failed ones not at all.
  EXPECT_EQ(st.items, acknowledged * kBatchItems);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < (acknowledged + 3) * kBatchItems; ++i) ids.push_back(i);
  std::vector<Record> recs;
  ASSERT_TRUE(db->Get("c", ids.data(), ids.size(), &recs).ok());
  for (int64_t i = 0; i < int64_t(ids.size()); ++i) {
    ASSERT_EQ(recs[i].found, i < acknowledged * kBatchItems) << "item " << i;
  }
  testing::Batch last =
      RandomBatch(spec, kBatchItems, (acknowledged - 1) * kBatchItems, uint64_t(acknowledged - 1));
  EXPECT_EQ(recs[(acknowledged - 1) * kBatchItems].mean,
            std::vector<float>(last.mean.begin(), last.mean.begin() + kDim));
  EXPECT_FALSE(st.index_stale) << st.index_note;
  // Writable again.
  testing::Batch next = RandomBatch(spec, kBatchItems, acknowledged * kBatchItems, 999);
  Status s = db->Ingest("c", next.ingest(), nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace hedgedb
