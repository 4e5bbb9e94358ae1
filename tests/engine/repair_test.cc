// RepairDB after damage to a table file: RocksDB's repair sets the whole
// table aside; the collection's arena snapshot gives its records back when
// it agrees with what survived, and the report says what is still gone.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "hedgedb/db.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace testing {
namespace {

namespace fs = std::filesystem;

// The largest table file of the store.
std::string LargestTable(const std::string& db_path) {
  std::string best;
  uintmax_t best_size = 0;
  for (const auto& e : fs::directory_iterator(db_path + "/store")) {
    if (e.path().extension() != ".sst" || e.file_size() <= best_size) continue;
    best = e.path().string();
    best_size = e.file_size();
  }
  return best;
}

// Flips one byte in place.
void FlipByte(const std::string& file, uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  const char c = char(f.get() ^ 0x20);
  f.seekp(std::streamoff(offset));
  f.put(c);
}

// 3,000 points on a flat index; closed twice, so that the second open
// writes the log into table files (the records' table is the largest) and
// the first close wrote the arena snapshot.
Batch MakeDamagedDatabase(const std::string& path, bool keep_snapshot) {
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 16, "Flat");
  Batch items = RandomBatch(spec, 3000, 0, 1);
  {
    auto db = OpenDb(path);
    EXPECT_TRUE(db->CreateCollection(spec).ok());
    EXPECT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
  }
  { OpenDb(path); }
  const std::string table = LargestTable(path);
  EXPECT_GT(fs::file_size(table), uintmax_t(200000));
  FlipByte(table, fs::file_size(table) / 3);  // a data block
  if (!keep_snapshot) {
    for (const auto& e : fs::directory_iterator(path + "/index")) {
      if (e.path().extension() == ".harena") fs::remove(e.path());
    }
  }
  return items;
}

void ExpectHolds(DB* db, const Batch& items, int64_t n) {
  std::vector<Record> records;
  ASSERT_TRUE(db->Get("c", items.ids.data(), size_t(n), &records).ok());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(records[size_t(i)].found) << i;
    ASSERT_EQ(records[size_t(i)].label, items.labels[size_t(i)]);
    ASSERT_EQ(records[size_t(i)].vec,
              std::vector<float>(items.vec.begin() + i * 16, items.vec.begin() + (i + 1) * 16));
  }
}

// Before the fix: exit 0 with "items": 0, the table in store/lost/ and the
// snapshot that held every row deleted.
TEST(RepairTest, DamagedTableIsRestoredFromTheArenaSnapshot) {
  TempDir dir;
  const Batch items = MakeDamagedDatabase(dir.path(), /*keep_snapshot=*/true);
  RepairReport report;
  ASSERT_TRUE(RepairDB(dir.path(), &report).ok());
  ASSERT_EQ(report.set_aside.size(), 1u);
  EXPECT_TRUE(fs::exists(report.set_aside[0]));  // kept
  ASSERT_EQ(report.collections.size(), 1u);
  EXPECT_EQ(report.collections[0].restored, 3000) << report.collections[0].note;
  EXPECT_TRUE(report.complete());
  EXPECT_FALSE(fs::exists(dir.path() + "/index.repair"));
  auto db = OpenDb(dir.path());
  EXPECT_EQ(StatsOf(db.get(), "c").items, 3000);
  ExpectHolds(db.get(), items, 3000);
  VerifyReport verified;
  ASSERT_TRUE(db->Verify("", &verified).ok());
  EXPECT_TRUE(verified.ok());
}

// Without a snapshot the records of the unreadable block are gone: the
// report counts those of the readable blocks that are nowhere now and says
// that the unread part may have held more; RepairDB(path) fails.
TEST(RepairTest, WithoutASnapshotTheLossIsReported) {
  TempDir dir;
  MakeDamagedDatabase(dir.path(), /*keep_snapshot=*/false);
  fs::copy(dir.path(), dir.path() + ".copy", fs::copy_options::recursive);
  RepairReport report;
  ASSERT_TRUE(RepairDB(dir.path(), &report).ok());
  ASSERT_EQ(report.collections.size(), 1u);
  const RepairCollection& c = report.collections[0];
  EXPECT_EQ(c.restored, 0);
  EXPECT_EQ(c.note, "no arena snapshot");
  EXPECT_FALSE(report.complete());
  EXPECT_TRUE(c.possibly_lost);
  // Every readable block was read back: only one block's records (of
  // 3,000) are not counted.
  EXPECT_GT(c.lost_records, 2900);
  EXPECT_LT(c.lost_records, 3000);
  const Status s = RepairDB(dir.path() + ".copy");
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("store/lost"), std::string::npos) << s.ToString();
  fs::remove_all(dir.path() + ".copy");
}

// A snapshot that disagrees with a record that survived (one changed behind
// the store's back, at the same sequence number) is not used.
TEST(RepairTest, SnapshotThatDisagreesWithTheSurvivorsIsNotUsed) {
  TempDir dir;
  MakeDamagedDatabase(dir.path(), /*keep_snapshot=*/true);
  {
    std::unique_ptr<storage::RecordStore> store;
    storage::StoreOptions so;
    so.create_if_missing = false;
    // The damaged table is not read by an open or a point write.
    ASSERT_TRUE(storage::RecordStore::Open(so, dir.path() + "/store", &store).ok());
    std::vector<storage::CollectionMeta> metas;
    ASSERT_TRUE(store->LoadCatalog(&metas).ok());
    std::string row(16 * sizeof(float), '\0');
    storage::RecordWrite w;
    w.id = 7;
    w.row = row.data();
    ASSERT_TRUE(store
                    ->PutRawRecordForTest(
                        storage::RecordStore::RecordKey(metas[0].id, 7),
                        storage::RecordStore::EncodeRecord(metas[0].sequence, w, row.size()))
                    .ok());
  }
  RepairReport report;
  ASSERT_TRUE(RepairDB(dir.path(), &report).ok());
  ASSERT_EQ(report.collections.size(), 1u);
  EXPECT_EQ(report.collections[0].restored, 0);
  EXPECT_NE(report.collections[0].note.find("item 7 differs"), std::string::npos)
      << report.collections[0].note;
  EXPECT_FALSE(report.complete());
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
