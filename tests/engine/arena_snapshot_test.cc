// The arena snapshot: a reopen maps it and answers exactly as before; a
// snapshot that is damaged (any flipped byte, truncated, longer), stale or
// another collection's is detected, never used, and written again.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "storage/record_store.h"
#include "temp_dir.h"

namespace hedgedb {
namespace testing {
namespace {

using testing_util::ReadBytes;
using testing_util::WriteBytes;

// The one arena snapshot in the database's index folder ("" if none).
std::string ArenaFile(const std::string& db_path, const std::string& skip = "") {
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(db_path + "/index")) {
    if (e.path().extension() == ".harena" && e.path().string() != skip) file = e.path().string();
  }
  return file;
}

// What a reopened collection must answer exactly as before.
struct Answers {
  std::vector<SearchResult> results;
  std::vector<Record> records;
  bool operator==(const Answers& o) const {
    if (results.size() != o.results.size() || records.size() != o.records.size()) return false;
    for (size_t q = 0; q < results.size(); ++q) {
      const auto& a = results[q].hits;
      const auto& b = o.results[q].hits;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].id != b[i].id || a[i].score != b[i].score || a[i].label != b[i].label ||
            a[i].has_label != b[i].has_label) {
          return false;
        }
      }
    }
    for (size_t i = 0; i < records.size(); ++i) {
      const Record& a = records[i];
      const Record& b = o.records[i];
      if (a.id != b.id || a.found != b.found || a.has_label != b.has_label || a.label != b.label ||
          a.vec != b.vec || a.mean != b.mean || a.var != b.var || a.weights != b.weights ||
          a.codes != b.codes) {
        return false;
      }
    }
    return true;
  }
};

Answers Ask(DB* db, const CollectionSpec& spec, const std::vector<int64_t>& ids) {
  Answers a;
  Batch queries = QueryBatch(spec, 8, 99);
  SearchOptions opt;
  opt.k = 5;
  opt.exhaustive = true;  // every live row scored: the whole arena matters
  EXPECT_TRUE(db->Search(spec.name, queries.view(), opt, &a.results).ok());
  EXPECT_TRUE(db->Get(spec.name, ids.data(), ids.size(), &a.records).ok());
  return a;
}

// Ids 0..599 labelled, 600..699 not; 5 and 50 removed.
void Fill(DB* db, const CollectionSpec& spec) {
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest(spec.name, RandomBatch(spec, 600, 0, 1).ingest(), nullptr).ok());
  Batch unlabelled = RandomBatch(spec, 100, 600, 2);
  unlabelled.labels.clear();
  ASSERT_TRUE(db->Ingest(spec.name, unlabelled.ingest(), nullptr).ok());
  const std::vector<int64_t> gone = {5, 50};
  ASSERT_TRUE(db->Remove(spec.name, gone.data(), gone.size(), nullptr).ok());
}

const std::vector<int64_t> kAsked = {0, 1, 4, 6, 599, 600, 699};

class ArenaSnapshotKindTest : public ::testing::TestWithParam<Kind> {};

TEST_P(ArenaSnapshotKindTest, ReopenMapsTheSnapshotAndAnswersAsBefore) {
  TempDir dir;
  // Codes take their own index (the default); the others a flat one.
  const CollectionSpec spec =
      MakeSpec("c", GetParam(), 16, GetParam() == Kind::kCodes ? "" : "Flat");
  Answers before;
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), spec);
    before = Ask(db.get(), spec, kAsked);
    const CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_EQ(st.arena_source, "records");  // a new collection
  }
  ASSERT_FALSE(ArenaFile(dir.path()).empty());
  {
    auto db = OpenDb(dir.path());
    const CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_EQ(st.arena_source, "snapshot");
    EXPECT_EQ(st.arena_note, "");
    EXPECT_EQ(st.items, 698);
    EXPECT_GT(st.arena_mapped_bytes, 0);
    EXPECT_EQ(st.arena_mapped_bytes % 698, 0);
    EXPECT_TRUE(Ask(db.get(), spec, kAsked) == before);
    // Writes after the mapping: new rows after the mapped ones, removals.
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 100, 700, 3).ingest(), nullptr).ok());
    const std::vector<int64_t> gone = {6};
    ASSERT_TRUE(db->Remove("c", gone.data(), 1, nullptr).ok());
    before = Ask(db.get(), spec, {0, 1, 699, 700, 799});
  }
  auto db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.arena_source, "snapshot") << st.arena_note;
  EXPECT_EQ(st.items, 797);
  EXPECT_TRUE(Ask(db.get(), spec, {0, 1, 699, 700, 799}) == before);
  std::vector<Record> gone;
  const std::vector<int64_t> removed = {5, 6, 50};
  ASSERT_TRUE(db->Get("c", removed.data(), removed.size(), &gone).ok());
  for (const Record& r : gone) EXPECT_FALSE(r.found) << r.id;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ArenaSnapshotKindTest,
                         ::testing::Values(Kind::kPoint, Kind::kGaussian, Kind::kMog,
                                           Kind::kCodes));

// Damages the snapshot with `damage`, reopens, and expects the records to be
// read (note naming `why`), the same answers, and a fresh snapshot after.
void ExpectDamageDetected(const std::string& why,
                          const std::function<void(std::string* bytes)>& damage) {
  SCOPED_TRACE(why);
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "IVF8,Flat");
  Answers before;
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), spec);
    before = Ask(db.get(), spec, kAsked);
  }
  const std::string file = ArenaFile(dir.path());
  std::string bytes = ReadBytes(file);
  damage(&bytes);
  WriteBytes(file, bytes);
  {
    auto db = OpenDb(dir.path());
    const CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_EQ(st.arena_source, "records");
    EXPECT_NE(st.arena_note.find(why), std::string::npos) << st.arena_note;
    EXPECT_EQ(st.arena_mapped_bytes, 0);
    EXPECT_TRUE(Ask(db.get(), spec, kAsked) == before);
  }
  auto db = OpenDb(dir.path());  // the open wrote a good snapshot again
  const CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.arena_source, "snapshot") << st.arena_note;
  EXPECT_TRUE(Ask(db.get(), spec, kAsked) == before);
}

TEST(ArenaSnapshotTest, FlippedBytesAnywhereAreDetected) {
  // The last byte is part of the last row; byte 70 part of the ids; byte 20
  // of the sequence number in the header.
  ExpectDamageDetected("checksum (rows)", [](std::string* b) { b->back() ^= 0x01; });
  ExpectDamageDetected("checksum (tables)", [](std::string* b) { (*b)[70] ^= 0x10; });
  ExpectDamageDetected("header checksum", [](std::string* b) { (*b)[20] ^= 0x01; });
  ExpectDamageDetected("bad header", [](std::string* b) { (*b)[0] = 'X'; });
}

TEST(ArenaSnapshotTest, UpsertsAndIdsOutOfOrderKeepTheSnapshot) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "Flat");
  Answers before;
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), spec);
    // Ids in no order, and an upsert: the arena's rows are not in id order.
    Batch later = RandomBatch(spec, 3, 0, 5);
    later.ids = {900, 800, 850};
    ASSERT_TRUE(db->Ingest("c", later.ingest(), nullptr).ok());
    Batch replaced = RandomBatch(spec, 2, 0, 6);
    replaced.ids = {3, 1};
    IngestBatch upsert = replaced.ingest();
    upsert.upsert = true;
    ASSERT_TRUE(db->Ingest("c", upsert, nullptr).ok());
    before = Ask(db.get(), spec, {0, 1, 3, 800, 850, 900});
  }
  auto db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.arena_source, "snapshot") << st.arena_note;
  EXPECT_EQ(st.items, 701);
  EXPECT_TRUE(Ask(db.get(), spec, {0, 1, 3, 800, 850, 900}) == before);
}

TEST(ArenaSnapshotTest, NonZeroPaddingIsDetected) {
  // The header is 60 bytes, the tables 25 per row: byte 65,000 is padding
  // before the rows at 64 KiB (698 rows x 25 = 17,450 bytes of tables).
  ExpectDamageDetected("padding", [](std::string* b) { (*b)[65000] = 1; });
}

TEST(ArenaSnapshotTest, TruncatedOrLongerFileIsDetected) {
  ExpectDamageDetected("truncated", [](std::string* b) { b->pop_back(); });
  ExpectDamageDetected("truncated", [](std::string* b) { b->push_back('\0'); });
  ExpectDamageDetected("bad header", [](std::string* b) { b->resize(10); });
}

TEST(ArenaSnapshotTest, StaleSnapshotIsNotUsed) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "Flat");
  std::string old_snapshot;
  Answers before;
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), spec);
  }
  old_snapshot = ReadBytes(ArenaFile(dir.path()));
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 50, 700, 3).ingest(), nullptr).ok());
    before = Ask(db.get(), spec, {0, 700, 749});
  }
  // The snapshot from before the last batch: its rows are all valid, but
  // item 700.. is missing from it.
  WriteBytes(ArenaFile(dir.path()), old_snapshot);
  auto db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.arena_source, "records");
  EXPECT_NE(st.arena_note.find("stale"), std::string::npos) << st.arena_note;
  EXPECT_EQ(st.items, 748);
  EXPECT_TRUE(Ask(db.get(), spec, {0, 700, 749}) == before);
}

TEST(ArenaSnapshotTest, SnapshotOfAnotherCollectionIsNotUsed) {
  TempDir dir;
  const CollectionSpec a = MakeSpec("a", Kind::kGaussian, 16, "Flat");
  const CollectionSpec b = MakeSpec("b", Kind::kGaussian, 16, "Flat");
  Answers before;
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), a);
    Fill(db.get(), b);
    before = Ask(db.get(), b, kAsked);
  }
  // Both have 698 items at the same sequence: only the binding differs.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/index")) {
    if (e.path().extension() == ".harena") files.push_back(e.path().string());
  }
  ASSERT_EQ(files.size(), 2u);
  std::sort(files.begin(), files.end());
  WriteBytes(files[1], ReadBytes(files[0]));
  auto db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "b");
  EXPECT_EQ(st.arena_source, "records");
  EXPECT_NE(st.arena_note.find("another collection"), std::string::npos) << st.arena_note;
  EXPECT_TRUE(Ask(db.get(), b, kAsked) == before);
}

TEST(ArenaSnapshotTest, UnfinishedWritesOfADeadWriterAreRemoved) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "Flat");
  { OpenDb(dir.path())->CreateCollection(spec); }
  const std::string leftover = ArenaFile(dir.path()) + ".tmp.4242";
  WriteBytes(leftover, std::string(1000, 'x'));
  {
    Options reader;
    reader.read_only = true;  // a reader writes and deletes nothing
    OpenDb(dir.path(), reader);
    EXPECT_TRUE(std::filesystem::exists(leftover));
  }
  auto db = OpenDb(dir.path());
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_EQ(StatsOf(db.get(), "c").arena_source, "snapshot");
}

// The kinds of the findings of `list`.
std::vector<std::string> KindsOf(const std::vector<VerifyFinding>& list) {
  std::vector<std::string> kinds;
  for (const VerifyFinding& f : list) kinds.push_back(f.kind);
  return kinds;
}

TEST(ArenaSnapshotTest, VerifyChecksTheSnapshotAgainstTheRecords) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "Flat");
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), spec);
  }
  VerifyReport report;
  ASSERT_TRUE(VerifyDB(dir.path(), "", &report).ok());
  EXPECT_TRUE(report.problems.empty());
  EXPECT_TRUE(report.notes.empty());

  // A damaged snapshot is never used by an open, but it was changed in
  // place, and a process that mapped it before may serve the change: a
  // problem. A stale one is only unused: a note.
  const std::string file = ArenaFile(dir.path());
  const std::string good = ReadBytes(file);
  std::string bytes = good;
  bytes.back() ^= 0x01;
  WriteBytes(file, bytes);
  ASSERT_TRUE(VerifyDB(dir.path(), "", &report).ok());
  EXPECT_EQ(KindsOf(report.problems), std::vector<std::string>{"arena_corrupt"});
  EXPECT_TRUE(report.notes.empty());
  bytes = good;
  bytes[20] ^= 0x01;  // the sequence number, and so the header checksum
  WriteBytes(file, bytes);
  ASSERT_TRUE(VerifyDB(dir.path(), "", &report).ok());
  EXPECT_EQ(KindsOf(report.problems), std::vector<std::string>{"arena_corrupt"});
  WriteBytes(file, good);

  // A record changed behind the store's back (its sequence number stays): the
  // snapshot would be used and would serve the old row.
  {
    std::unique_ptr<storage::RecordStore> store;
    ASSERT_TRUE(
        storage::RecordStore::Open(storage::StoreOptions(), dir.path() + "/store", &store).ok());
    std::vector<storage::CollectionMeta> metas;
    ASSERT_TRUE(store->LoadCatalog(&metas).ok());
    storage::StoredRecord rec;
    bool found = false;
    ASSERT_TRUE(store->GetRecord(metas[0], 7, &rec, &found).ok());
    ASSERT_TRUE(found);
    rec.row[0] ^= 0x40;
    storage::RecordWrite w;
    w.id = 7;
    w.has_label = rec.has_label;
    w.label = rec.label;
    w.row = rec.row.data();
    ASSERT_TRUE(store
                    ->PutRawRecordForTest(
                        storage::RecordStore::RecordKey(metas[0].id, 7),
                        storage::RecordStore::EncodeRecord(rec.sequence, w, rec.row.size()))
                    .ok());
  }
  ASSERT_TRUE(VerifyDB(dir.path(), "", &report).ok());
  ASSERT_EQ(KindsOf(report.problems), std::vector<std::string>{"arena_mismatch"});
  EXPECT_NE(report.problems[0].detail.find("item 7 differs"), std::string::npos)
      << report.problems[0].detail;
}

TEST(ArenaSnapshotTest, DropRemovesTheSnapshot) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "Flat");
  auto db = OpenDb(dir.path());
  Fill(db.get(), spec);
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_FALSE(ArenaFile(dir.path()).empty());
  ASSERT_TRUE(db->DropCollection("c").ok());
  EXPECT_EQ(ArenaFile(dir.path()), "");
}

// A write into the mapped snapshot from outside, while the database is open:
// the open checked the file, so the changed row is served, but it is never
// written into a new snapshot with valid checksums (before the fix: the
// close after an ingest re-saved it, and every later open served it). Flush
// says so; the file is deleted; the next open reads the records.
TEST(ArenaSnapshotTest, RowsChangedUnderTheMappingAreNeverSavedAgain) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "Flat");
  Answers before;
  {
    auto db = OpenDb(dir.path());
    Fill(db.get(), spec);
  }
  const std::string file = ArenaFile(dir.path());
  {
    auto db = OpenDb(dir.path());
    ASSERT_EQ(StatsOf(db.get(), "c").arena_source, "snapshot");
    // The snapshot is behind after this, so the flush writes one.
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 10, 700, 3).ingest(), nullptr).ok());
    before = Ask(db.get(), spec, kAsked);
    {
      // In place: the same file, one byte of the first row (the rows start
      // at 64 KiB; the last page took the appended rows, a private copy).
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(65536 + 3);
      const char c = char(f.get() ^ 0x5A);
      f.seekp(65536 + 3);
      f.put(c);
    }
    const Status flushed = db->Flush();
    EXPECT_TRUE(flushed.IsCorruption()) << flushed.ToString();
    EXPECT_NE(flushed.message().find("changed on disk"), std::string::npos) << flushed.ToString();
    EXPECT_FALSE(std::filesystem::exists(file));
    EXPECT_NE(StatsOf(db.get(), "c").arena_note.find("changed on disk"), std::string::npos);
  }  // the close tries again, and refuses again
  EXPECT_FALSE(std::filesystem::exists(file));
  auto db = OpenDb(dir.path());
  EXPECT_EQ(StatsOf(db.get(), "c").arena_source, "records");
  EXPECT_TRUE(Ask(db.get(), spec, kAsked) == before);
  VerifyReport report;
  ASSERT_TRUE(db->Verify("", &report).ok());
  EXPECT_TRUE(report.problems.empty());
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
