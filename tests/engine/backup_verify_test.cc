// DB::Backup (a consistent copy taken while other threads ingest) and
// DB::Verify / VerifyDB (read-only checks that name what is damaged).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/row_layout.h"
#include "engine/child_process.h"
#include "engine/engine_test_util.h"
#include "hedgedb/db.h"
#include "index/coarse_index.h"
#include "query/verify.h"
#include "storage/record_store.h"
#include "temp_dir.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::OpenDb;
using testing::RandomBatch;
using testing::StatsOf;
using testing::TempDir;
using testing_util::ReadBytes;
using testing_util::WriteBytes;
namespace fs = std::filesystem;

// Every file under `dir` with its bytes.
std::map<std::string, std::string> DirectoryBytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files[entry.path().string()] = ReadBytes(entry.path().string());
  }
  return files;
}

VerifyReport VerifyOrFail(const std::string& path, const std::string& collection = "") {
  VerifyReport report;
  const Status s = VerifyDB(path, collection, &report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return report;
}

// The findings of one kind.
std::vector<VerifyFinding> Of(const std::vector<VerifyFinding>& findings, const std::string& kind) {
  std::vector<VerifyFinding> out;
  for (const auto& f : findings) {
    if (f.kind == kind) out.push_back(f);
  }
  return out;
}

std::string Describe(const VerifyReport& r) {
  std::string s;
  for (const auto& f : r.problems) {
    s += "problem " + f.kind + " " + f.collection + ": " + f.detail + "\n";
  }
  for (const auto& f : r.notes) s += "note " + f.kind + " " + f.collection + ": " + f.detail + "\n";
  return s;
}

// The catalog entry of a collection, read from a read-only store.
storage::CollectionMeta MetaOf(const std::string& db_path, const std::string& name,
                               std::string* identity = nullptr) {
  std::unique_ptr<storage::RecordStore> store;
  storage::StoreOptions so;
  so.read_only = true;
  EXPECT_TRUE(storage::RecordStore::Open(so, db_path + "/store", &store).ok());
  std::vector<storage::CollectionMeta> metas;
  EXPECT_TRUE(store->LoadCatalog(&metas).ok());
  if (identity) *identity = store->identity();
  for (const auto& m : metas) {
    if (m.spec.name == name) return m;
  }
  ADD_FAILURE() << "no collection " << name;
  return storage::CollectionMeta();
}

constexpr int64_t kBatch = 10;
constexpr int kBatchesPerThread = 30;

// Ids of batch b of thread t.
int64_t FirstId(int t, int b) { return 1000000 + int64_t(t) * 100000 + int64_t(b) * kBatch; }

TEST(Backup, WhileTwoThreadsIngestTheCopyHoldsWholeAcknowledgedBatches) {
  TempDir dir;
  const std::string db_path = dir.path() + "/db", copy_path = dir.path() + "/copy";
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF4,Flat");
  Options options;
  options.index_save_interval = 15;  // index files are rewritten while the backup runs
  auto db = OpenDb(db_path, options);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 300, 0, 1).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());  // trained and saved

  std::atomic<int> acked[2] = {{0}, {0}};
  std::atomic<bool> failed{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      for (int b = 0; b < kBatchesPerThread; ++b) {
        testing::Batch batch = RandomBatch(spec, kBatch, FirstId(t, b), 100 + t * 1000 + b);
        if (!db->Ingest("c", batch.ingest(), nullptr).ok()) failed = true;
        acked[t] = b + 1;
      }
    });
  }
  // Start the backup once both writers are under way.
  while (acked[0] < 3 || acked[1] < 3) std::this_thread::yield();
  const int acked_before[2] = {acked[0].load(), acked[1].load()};
  BackupResult result;
  const Status backed_up = db->Backup(copy_path, &result);
  for (auto& w : writers) w.join();
  ASSERT_TRUE(backed_up.ok()) << backed_up.ToString();
  ASSERT_FALSE(failed);
  ASSERT_EQ(result.collections.size(), 1u);
  EXPECT_EQ(result.collections[0].name, "c");
  EXPECT_TRUE(result.collections[0].index_copied);

  // The copy's index agrees with its records.
  const VerifyReport report = VerifyOrFail(copy_path);
  EXPECT_TRUE(report.ok()) << Describe(report);
  ASSERT_EQ(report.collections.size(), 1u);
  EXPECT_TRUE(report.collections[0].index_present);
  EXPECT_EQ(report.collections[0].items, result.collections[0].items);
  EXPECT_EQ(report.collections[0].sequence, result.collections[0].sequence);

  auto copy = OpenDb(copy_path);
  const CollectionStats st = StatsOf(copy.get(), "c");
  EXPECT_EQ(st.index_note, "") << "the copied index file was not used";
  int64_t items = 300;
  for (int t = 0; t < 2; ++t) {
    for (int b = 0; b < kBatchesPerThread; ++b) {
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < kBatch; ++i) ids.push_back(FirstId(t, b) + i);
      std::vector<Record> records;
      ASSERT_TRUE(copy->Get("c", ids.data(), ids.size(), &records).ok());
      int64_t found = 0;
      for (const Record& r : records) found += r.found ? 1 : 0;
      if (b < acked_before[t]) {
        EXPECT_EQ(found, kBatch) << "thread " << t << " batch " << b << " was acknowledged";
      } else {
        EXPECT_TRUE(found == 0 || found == kBatch)
            << "thread " << t << " batch " << b << ": " << found;
      }
      items += found;
    }
  }
  EXPECT_EQ(st.items, items);
  EXPECT_EQ(st.items, result.collections[0].items);
  EXPECT_EQ(st.sequence, result.collections[0].sequence);
}

TEST(Backup, IntoANonEmptyDirectoryOrOntoAFileIsRefused) {
  TempDir dir;
  auto db = OpenDb(dir.path() + "/db");
  ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kPoint, 4, "Flat")).ok());
  fs::create_directory(dir.path() + "/full");
  WriteBytes(dir.path() + "/full/keep.txt", "mine");
  Status s = db->Backup(dir.path() + "/full", nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not empty"), std::string::npos) << s.ToString();
  EXPECT_EQ(DirectoryBytes(dir.path() + "/full").size(), 1u);
  EXPECT_EQ(ReadBytes(dir.path() + "/full/keep.txt"), "mine");

  WriteBytes(dir.path() + "/file", "x");
  s = db->Backup(dir.path() + "/file", nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(ReadBytes(dir.path() + "/file"), "x");

  // An empty directory is fine.
  fs::create_directory(dir.path() + "/empty");
  s = db->Backup(dir.path() + "/empty", nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() + "/db";
    auto db = OpenDb(path_);
    spec_ = MakeSpec("c", Kind::kGaussian, 8, "IVF4,Flat");
    ASSERT_TRUE(db->CreateCollection(spec_).ok());
    ASSERT_TRUE(db->CreateCollection(MakeSpec("d", Kind::kGaussian, 8, "IVF4,Flat")).ok());
    testing::Batch batch = RandomBatch(spec_, 300, 0, 1);
    std::vector<std::string> payloads(300, "payload");
    IngestBatch ib = batch.ingest();
    ib.payloads = payloads.data();
    ASSERT_TRUE(db->Ingest("c", ib, nullptr).ok());
    ASSERT_TRUE(db->Ingest("d", RandomBatch(spec_, 300, 0, 2).ingest(), nullptr).ok());
  }
  // Bit rot inside the rows of these items of collection "c".
  void CorruptRecords(const std::vector<int64_t>& ids) {
    const storage::CollectionMeta c = MetaOf(path_, "c");
    {
      std::unique_ptr<storage::RecordStore> store;
      ASSERT_TRUE(
          storage::RecordStore::Open(storage::StoreOptions(), path_ + "/store", &store).ok());
      for (int64_t id : ids) {
        storage::StoredRecord rec;
        bool found = false;
        ASSERT_TRUE(store->GetRecord(c, id, &rec, &found).ok());
        storage::RecordWrite w;
        w.id = id;
        w.row = rec.row.data();
        std::string value = storage::RecordStore::EncodeRecord(rec.sequence, w, rec.row.size());
        value[30] = char(value[30] ^ 0xFF);  // bit rot inside the row
        ASSERT_TRUE(
            store->PutRawRecordForTest(storage::RecordStore::RecordKey(c.id, id), value).ok());
      }
    }
  }
  std::string IndexFile(const std::string& name) {
    return query::IndexFilePath(path_, MetaOf(path_, name).id);
  }

  TempDir dir_;
  std::string path_;
  CollectionSpec spec_;
};

TEST_F(VerifyTest, CleanDatabaseHasNoProblems) {
  const VerifyReport report = VerifyOrFail(path_);
  EXPECT_TRUE(report.ok()) << Describe(report);
  EXPECT_TRUE(report.notes.empty()) << Describe(report);
  ASSERT_EQ(report.collections.size(), 2u);
  EXPECT_EQ(report.collections[0].items, 300);
  EXPECT_EQ(report.collections[0].index_ids, 300);
  EXPECT_TRUE(report.collections[0].index_present);
  // One collection only.
  EXPECT_EQ(VerifyOrFail(path_, "d").collections.size(), 1u);
  VerifyReport unknown;
  EXPECT_TRUE(VerifyDB(path_, "nope", &unknown).IsNotFound());
  EXPECT_TRUE(VerifyDB(dir_.path() + "/none", "", &unknown).IsNotFound());
}

TEST_F(VerifyTest, OpenDatabaseVerifiesWhileInUse) {
  auto db = OpenDb(path_);
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec_, 20, 1000, 3).ingest(), nullptr).ok());
  VerifyReport report;
  ASSERT_TRUE(db->Verify("", &report).ok());
  EXPECT_TRUE(report.ok()) << Describe(report);
  // The file on disk predates the last batch: harmless, the next open adds it.
  EXPECT_EQ(Of(report.notes, "index_behind").size(), 1u) << Describe(report);
}

TEST_F(VerifyTest, FlippedIndexByteIsFoundAndNothingChanges) {
  const std::string file = IndexFile("c");
  std::string bytes = ReadBytes(file);
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() / 2] = char(bytes[bytes.size() / 2] ^ 0x40);
  WriteBytes(file, bytes);
  const auto before = DirectoryBytes(path_);
  const VerifyReport report = VerifyOrFail(path_);
  EXPECT_EQ(DirectoryBytes(path_), before);
  ASSERT_EQ(report.problems.size(), 1u) << Describe(report);
  EXPECT_EQ(report.problems[0].kind, "index_corrupt");
  EXPECT_EQ(report.problems[0].collection, "c");
  EXPECT_NE(report.problems[0].detail.find("checksum"), std::string::npos);
}

TEST_F(VerifyTest, IndexFileOfAnotherCollectionIsFound) {
  WriteBytes(IndexFile("c"), ReadBytes(IndexFile("d")));
  const VerifyReport report = VerifyOrFail(path_);
  ASSERT_EQ(report.problems.size(), 1u) << Describe(report);
  EXPECT_EQ(report.problems[0].kind, "index_foreign");
  EXPECT_EQ(report.problems[0].collection, "c");
}

TEST_F(VerifyTest, RecordsThatFailTheirChecksumAreFoundAsRanges) {
  CorruptRecords({4, 5, 6, 9});
  const auto before = DirectoryBytes(path_);
  const VerifyReport report = VerifyOrFail(path_);
  EXPECT_EQ(DirectoryBytes(path_), before);
  const auto bad = Of(report.problems, "record_corrupt");
  ASSERT_EQ(bad.size(), 2u) << Describe(report);
  EXPECT_EQ(bad[0].collection, "c");
  EXPECT_EQ(bad[0].first_id, 4);
  EXPECT_EQ(bad[0].last_id, 6);
  EXPECT_EQ(bad[0].count, 3);
  EXPECT_EQ(bad[1].first_id, 9);
  EXPECT_NE(bad[0].detail.find("checksum"), std::string::npos);
  // The damaged items are not counted as live: the index misses nothing else.
  EXPECT_TRUE(Of(report.problems, "index_missing_ids").empty()) << Describe(report);
}

TEST_F(VerifyTest, BackupOfADamagedDatabaseSaysSoAndKeepsTheCopy) {
  CorruptRecords({7});
  auto db = OpenDb(path_);
  const std::string copy = dir_.path() + "/copy";
  const Status s = db->Backup(copy, nullptr);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("record_corrupt"), std::string::npos) << s.ToString();
  const auto bad = Of(VerifyOrFail(copy).problems, "record_corrupt");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].first_id, 7);
}

TEST_F(VerifyTest, MissingIndexFileIsANoteNotAProblem) {
  ASSERT_TRUE(fs::remove(IndexFile("c")));
  const VerifyReport report = VerifyOrFail(path_);
  EXPECT_TRUE(report.ok()) << Describe(report);
  ASSERT_EQ(Of(report.notes, "index_missing").size(), 1u) << Describe(report);
  EXPECT_EQ(Of(report.notes, "index_missing")[0].collection, "c");
}

TEST_F(VerifyTest, IndexMissingLiveItemsOrAheadOfTheRecordsIsFound) {
  // An index file that claims the collection's sequence but lacks items
  // 100..149, as a faulty save would leave it.
  std::string identity;
  const storage::CollectionMeta c = MetaOf(path_, "c", &identity);
  const uint64_t binding = query::IndexBinding(identity, c);
  const testing::Batch all = RandomBatch(spec_, 300, 0, 1);
  std::unique_ptr<index::CoarseIndex> idx;
  ASSERT_TRUE(index::CoarseIndex::Create(spec_, &idx).ok());
  const size_t row_bytes = ItemRowBytes(spec_);
  std::vector<uint8_t> rows;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 300; ++i) {
    if (i >= 100 && i < 150) continue;
    rows.resize(rows.size() + row_bytes);
    PackItemRow(RowShapeOf(spec_), all.view(), i, rows.data() + rows.size() - row_bytes);
    ids.push_back(i);
  }
  ASSERT_TRUE(idx->Train(rows.data(), int64_t(ids.size())).ok());
  ASSERT_TRUE(idx->Add(rows.data(), int64_t(ids.size()), ids.data()).ok());
  const std::string file = IndexFile("c");
  ASSERT_TRUE(idx->Save(file, c.sequence, binding).ok());
  VerifyReport report = VerifyOrFail(path_);
  auto missing = Of(report.problems, "index_missing_ids");
  ASSERT_EQ(missing.size(), 1u) << Describe(report);
  EXPECT_EQ(missing[0].collection, "c");
  EXPECT_EQ(missing[0].first_id, 100);
  EXPECT_EQ(missing[0].last_id, 149);
  EXPECT_EQ(missing[0].count, 50);

  ASSERT_TRUE(idx->Save(file, c.sequence + 1, binding).ok());
  report = VerifyOrFail(path_);
  EXPECT_EQ(Of(report.problems, "index_ahead").size(), 1u) << Describe(report);
}

}  // namespace
}  // namespace hedgedb

namespace hedgedb {
namespace {

// Two collections in one records table; one flipped byte in the block of
// the large one. Before the fix a whole-database verify returned the read
// error and no report (the command printed no JSON); verify --collection of
// the other one reported properly.
TEST(VerifyDamageTest, UnreadableTableBlockIsAProblemOfItsCollectionOnly) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  const CollectionSpec big = MakeSpec("a", Kind::kPoint, 16, "Flat");
  const CollectionSpec small = MakeSpec("b", Kind::kPoint, 16, "Flat");
  {
    auto db = OpenDb(path);
    ASSERT_TRUE(db->CreateCollection(big).ok());
    ASSERT_TRUE(db->CreateCollection(small).ok());
    ASSERT_TRUE(db->Ingest("a", RandomBatch(big, 3000, 0, 1).ingest(), nullptr).ok());
    ASSERT_TRUE(db->Ingest("b", RandomBatch(small, 50, 0, 2).ingest(), nullptr).ok());
  }
  { OpenDb(path); }  // the log goes into table files
  std::string table;
  for (const auto& e : fs::directory_iterator(path + "/store")) {
    if (e.path().extension() == ".sst" && (table.empty() || e.file_size() > fs::file_size(table)))
      table = e.path().string();
  }
  {
    std::fstream f(table, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(fs::file_size(table) / 3));  // a block of "a" (ids sort first)
    const char c = char(f.get() ^ 0x20);
    f.seekp(std::streamoff(fs::file_size(table) / 3));
    f.put(c);
  }
  const VerifyReport report = VerifyOrFail(path);
  EXPECT_FALSE(report.ok());
  const auto unreadable = Of(report.problems, "records_unreadable");
  ASSERT_EQ(unreadable.size(), 1u) << Describe(report);
  EXPECT_EQ(unreadable[0].collection, "a");
  EXPECT_EQ(Of(report.problems, "store_checksum").size(), 1u) << Describe(report);
  ASSERT_EQ(report.collections.size(), 1u);  // "b" was checked in full
  EXPECT_EQ(report.collections[0].name, "b");
  EXPECT_EQ(report.collections[0].items, 50);
}

// Verify of a closed database reads the store as of its open; a writer that
// saves an index file after that must not make it look like lost writes.
// Deterministic: the writer is in this process, the check's store is opened
// before the writer's last batch and index save.
TEST(VerifyDamageTest, IndexSavedByARunningWriterAfterTheViewIsNotAProblem) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4, "Flat");
  auto db = OpenDb(path);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 20, 0, 1).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  storage::StoreOptions so;
  so.create_if_missing = false;
  so.read_only = true;
  std::unique_ptr<storage::RecordStore> view;
  ASSERT_TRUE(storage::RecordStore::Open(so, path + "/store", &view).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 20, 20, 2).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());  // the index file covers a sequence the view lacks
  VerifyReport report;
  ASSERT_TRUE(query::VerifyStore(view.get(), path, "", &report).ok());
  EXPECT_EQ(Of(report.problems, "index_ahead").size(), 1u) << Describe(report);  // the race
  const query::LatestSequence latest = [&](const std::string& name, uint64_t* sequence) {
    std::unique_ptr<storage::RecordStore> now;
    HEDGEDB_RETURN_IF_ERROR(storage::RecordStore::Open(so, path + "/store", &now));
    std::vector<storage::CollectionMeta> metas;
    HEDGEDB_RETURN_IF_ERROR(now->LoadCatalog(&metas));
    for (const auto& m : metas) {
      if (m.spec.name == name) *sequence = m.sequence;
    }
    return Status::OK();
  };
  ASSERT_TRUE(query::VerifyStore(view.get(), path, "", &report, latest).ok());
  EXPECT_TRUE(report.ok()) << Describe(report);
  EXPECT_EQ(Of(report.notes, "index_newer_than_view").size(), 1u) << Describe(report);
}

// The writer process of VerifyBesideAWriterProcessSaysSo: this program run
// again (a fork would not do: the parent has threads, and a forked child
// that starts threads, as RocksDB does, is killed under ThreadSanitizer
// while the parent waits for it for ever). Opens the database, says 'y'
// (or 'n') on the ready pipe, holds it open until the done pipe delivers a
// byte or closes.
TEST(VerifyChild, HoldsTheDatabaseOpen) {
  const char* db_path = std::getenv("HEDGEDB_VERIFY_DB");
  const char* ready_text = std::getenv("HEDGEDB_VERIFY_READY_FD");
  const char* done_text = std::getenv("HEDGEDB_VERIFY_DONE_FD");
  if (!db_path || !ready_text || !done_text) GTEST_SKIP() << "only runs as a test's child";
  std::unique_ptr<DB> db;
  char c = DB::Open(Options(), db_path, &db).ok() ? 'y' : 'n';
  (void)!::write(std::atoi(ready_text), &c, 1);
  (void)!::read(std::atoi(done_text), &c, 1);  // until the parent is done
}

// VerifyDB beside a writer in another process says so (a note).
TEST(VerifyDamageTest, VerifyBesideAWriterProcessSaysSo) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  {
    auto db = OpenDb(path);
    ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kPoint, 4, "Flat")).ok());
  }
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  // The parent's ends stay out of the child, and the parent closes the
  // child's ends once it runs: a child that dies is an end of file here,
  // not a wait for ever.
  ASSERT_EQ(::fcntl(ready[0], F_SETFD, FD_CLOEXEC), 0);
  ASSERT_EQ(::fcntl(done[1], F_SETFD, FD_CLOEXEC), 0);
  const pid_t child = testing::SpawnSelf(
      {"--gtest_filter=VerifyChild.HoldsTheDatabaseOpen"},
      {"HEDGEDB_VERIFY_DB=" + path, "HEDGEDB_VERIFY_READY_FD=" + std::to_string(ready[1]),
       "HEDGEDB_VERIFY_DONE_FD=" + std::to_string(done[0])},
      -1);
  ::close(ready[1]);
  ::close(done[0]);
  ASSERT_GE(child, 0);
  char c = 0;
  const ssize_t got = ::read(ready[0], &c, 1);
  ::close(ready[0]);
  const VerifyReport report = VerifyOrFail(path);
  ::close(done[1]);  // the child closes the database and exits
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(got, 1);
  ASSERT_EQ(c, 'y');
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(report.ok()) << Describe(report);
  const auto running = Of(report.notes, "writer_running");
  ASSERT_EQ(running.size(), 1u) << Describe(report);
  EXPECT_NE(running[0].detail.find(std::to_string(child)), std::string::npos);
  const VerifyReport alone = VerifyOrFail(path);
  EXPECT_TRUE(Of(alone.notes, "writer_running").empty());
}

}  // namespace
}  // namespace hedgedb

namespace hedgedb {
namespace {

// A reader's backup after the writer restarted since the reader's view was
// read: the writer's open wrote the old log into a table file, deleted the
// log and started a new MANIFEST, so the files the reader's view names are
// gone. Before the fix the backup (RocksDB's checkpoint of the reader)
// failed on the missing files, or copied the writer's current files under
// the reader's old MANIFEST: a copy without the acknowledged batches. Now it
// catches up first and copies its view key by key.
TEST(ReaderBackupTest, HoldsEveryBatchAcknowledgedBeforeItAfterTheWriterRestarted) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4, "Flat");
  {
    auto writer = OpenDb(path);
    ASSERT_TRUE(writer->CreateCollection(spec).ok());
    ASSERT_TRUE(writer->Ingest("c", RandomBatch(spec, 100, 0, 1).ingest(), nullptr).ok());
  }
  Options ro;
  ro.read_only = true;
  auto reader = OpenDb(path, ro);
  ASSERT_EQ(StatsOf(reader.get(), "c").items, 100);
  for (int restart = 0; restart < 3; ++restart) {
    auto writer = OpenDb(path);
    ASSERT_TRUE(
        writer->Ingest("c", RandomBatch(spec, 100, 100 * (restart + 1), 2).ingest(), nullptr).ok());
  }
  { OpenDb(path); }  // and once more: the last batch is in a table only
  const std::string copy = dir.path() + "/copy";
  BackupResult result;
  const Status s = reader->Backup(copy, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(result.collections.size(), 1u);
  EXPECT_EQ(result.collections[0].items, 400);
  EXPECT_EQ(StatsOf(reader.get(), "c").items, 400);  // the backup caught the reader up
  auto restored = OpenDb(copy);
  EXPECT_EQ(StatsOf(restored.get(), "c").items, 400);
  EXPECT_TRUE(VerifyOrFail(copy).ok());
  // The copy is a database of its own.
  ASSERT_TRUE(restored->Ingest("c", RandomBatch(spec, 5, 1000, 3).ingest(), nullptr).ok());
}

}  // namespace
}  // namespace hedgedb
