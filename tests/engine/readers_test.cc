// Readers beside a writer: a child process holds the database open for
// writing and ingests, removes and flushes on command, while this process
// opens it read-only (Options::read_only), searches it and catches up.
//
// The writer is this same test binary, re-run with --gtest_filter on the
// ReadersChild test; commands come on one pipe, acknowledgements go back on
// another.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "child_process.h"
#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::OpenDb;
using testing::RandomBatch;
using testing::StatsOf;
using testing::TempDir;

constexpr int64_t kBatchItems = 100;
constexpr int kDim = 16;

CollectionSpec Spec() { return MakeSpec("c", Kind::kPoint, kDim, "IVF8,Flat"); }

// Batch b holds ids b * kBatchItems .. (b + 1) * kBatchItems - 1.
testing::Batch BatchNumber(int64_t b) {
  return RandomBatch(Spec(), kBatchItems, b * kBatchItems, uint64_t(b) + 1);
}

// Writer commands (int64 on the command pipe).
constexpr int64_t kExit = 0;          // close the database and exit
constexpr int64_t kFlush = -1;        // Flush (saves the index files)
constexpr int64_t kRemoveFirst = -2;  // remove batch 0
// n > 0: ingest the next n batches, acknowledging each.

// Runs only inside the child (the environment says so).
TEST(ReadersChild, Writer) {
  const char* db_path = std::getenv("HEDGEDB_READERS_DB");
  const char* cmd_fd_text = std::getenv("HEDGEDB_READERS_CMD_FD");
  const char* ack_fd_text = std::getenv("HEDGEDB_READERS_ACK_FD");
  if (!db_path || !cmd_fd_text || !ack_fd_text) GTEST_SKIP() << "only runs as a test's child";
  const int cmd_fd = std::atoi(cmd_fd_text), ack_fd = std::atoi(ack_fd_text);
  std::unique_ptr<DB> db;
  if (!DB::Open(Options(), db_path, &db).ok()) std::abort();
  auto ack = [&](int64_t value) {
    if (::write(ack_fd, &value, sizeof(value)) != sizeof(value)) std::abort();
  };
  ack(-1);  // open: the database is locked from here on
  int64_t next = 0;
  for (int64_t cmd; ::read(cmd_fd, &cmd, sizeof(cmd)) == sizeof(cmd) && cmd != kExit;) {
    if (cmd == kFlush) {
      if (!db->Flush().ok()) std::abort();
      ack(-1);
    } else if (cmd == kRemoveFirst) {
      std::vector<int64_t> ids(kBatchItems);
      for (int64_t i = 0; i < kBatchItems; ++i) ids[i] = i;
      if (!db->Remove("c", ids.data(), ids.size(), nullptr).ok()) std::abort();
      ack(-1);
    } else {
      for (int64_t i = 0; i < cmd; ++i, ++next) {
        if (!db->Ingest("c", BatchNumber(next).ingest(), nullptr).ok()) std::abort();
        ack(next);  // acknowledged: the batch is committed
      }
    }
  }
  db.reset();
  ack(-1);
}

// The writer child and its pipes.
class Writer {
 public:
  explicit Writer(const std::string& db) {
    int cmd[2], ack[2];
    EXPECT_EQ(::pipe(cmd), 0);
    EXPECT_EQ(::pipe(ack), 0);
    pid_ = testing::SpawnSelf(
        {"--gtest_filter=ReadersChild.Writer"},
        {"HEDGEDB_READERS_DB=" + db, "HEDGEDB_READERS_CMD_FD=" + std::to_string(cmd[0]),
         "HEDGEDB_READERS_ACK_FD=" + std::to_string(ack[1])},
        cmd[1]);
    EXPECT_GT(pid_, 0);
    ::close(cmd[0]);
    ::close(ack[1]);
    cmd_ = cmd[1];
    ack_ = ack[0];
    EXPECT_EQ(Ack(), -1);  // opened
  }
  ~Writer() {
    if (cmd_ >= 0) Stop();
  }
  void Send(int64_t cmd) { ASSERT_EQ(::write(cmd_, &cmd, sizeof(cmd)), ssize_t(sizeof(cmd))); }
  // The next acknowledgement (-2: the child is gone).
  int64_t Ack() {
    int64_t value = -2;
    if (::read(ack_, &value, sizeof(value)) != sizeof(value)) return -2;
    return value;
  }
  // Closes the database in the child and reaps it.
  void Stop() {
    Send(kExit);
    EXPECT_EQ(Ack(), -1);
    ::close(cmd_);
    ::close(ack_);
    cmd_ = ack_ = -1;
    int status = 0;
    EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int cmd_ = -1, ack_ = -1;
};

void CreateDatabase(const std::string& path) {
  std::unique_ptr<DB> db = OpenDb(path);
  ASSERT_TRUE(db->CreateCollection(Spec()).ok());
}

std::unique_ptr<DB> OpenReader(const std::string& path, std::vector<std::string>* warnings) {
  Options options;
  options.read_only = true;
  options.on_warning = [warnings](const std::string& w) { warnings->push_back(w); };
  std::unique_ptr<DB> db;
  const Status s = DB::Open(options, path, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

// What the reader sees is whole batches: `batches` of them from `first`
// (earlier ones removed), by stats, ListIds and Get alike.
void ExpectWholeBatches(DB* db, int64_t first, int64_t batches) {
  const CollectionStats st = StatsOf(db, "c");
  ASSERT_EQ(st.items, (batches - first) * kBatchItems);
  std::vector<int64_t> ids;
  ASSERT_TRUE(db->ListIds("c", &ids).ok());
  ASSERT_EQ(int64_t(ids.size()), st.items);
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], first * kBatchItems + int64_t(i));
  // The edges: the last id is there with its vector, the next one is not.
  const int64_t probe[] = {batches * kBatchItems - 1, batches * kBatchItems};
  std::vector<Record> recs;
  ASSERT_TRUE(db->Get("c", probe, 2, &recs).ok());
  EXPECT_FALSE(recs[1].found);
  if (batches > first) {
    ASSERT_TRUE(recs[0].found);
    const testing::Batch last = BatchNumber(batches - 1);
    EXPECT_EQ(recs[0].vec, std::vector<float>(last.vec.end() - kDim, last.vec.end()));
  }
}

// The top hit for the vector of item `id` (of batch id / kBatchItems).
int64_t TopHit(DB* db, int64_t id) {
  const testing::Batch b = BatchNumber(id / kBatchItems);
  EmbeddingView q;
  q.n = 1;
  q.vec = b.vec.data() + (id % kBatchItems) * kDim;
  SearchOptions so;
  so.k = 3;
  std::vector<SearchResult> results;
  const Status s = db->Search("c", q, so, &results);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok() || results[0].hits.empty()) return -1;
  return results[0].hits[0].id;
}

TEST(ReadersTest, ReaderSeesWholeBatchesWhileAWriterIngests) {
  TempDir dir;
  CreateDatabase(dir.path());
  Writer writer(dir.path());
  std::vector<std::string> warnings;
  std::unique_ptr<DB> reader = OpenReader(dir.path(), &warnings);
  ASSERT_TRUE(reader);
  ExpectWholeBatches(reader.get(), 0, 0);

  constexpr int64_t kBatches = 40;
  writer.Send(kBatches);
  int64_t seen = 0, acked = -1, rounds = 0;
  while (acked + 1 < kBatches) {
    ASSERT_TRUE(reader->CatchUp().ok());
    const int64_t items = StatsOf(reader.get(), "c").items;
    ASSERT_EQ(items % kBatchItems, 0) << "a partial batch is visible";
    const int64_t batches = items / kBatchItems;
    ASSERT_GE(batches, seen) << "the reader went backwards";
    seen = batches;
    ExpectWholeBatches(reader.get(), 0, batches);
    if (batches > 0) {
      EXPECT_LT(TopHit(reader.get(), items - 1), items);
    }
    ++rounds;
    acked = writer.Ack();
    ASSERT_NE(acked, -2) << "the writer died";
    // Everything acknowledged before a catch-up is in it.
    ASSERT_TRUE(reader->CatchUp().ok());
    ASSERT_GE(StatsOf(reader.get(), "c").items, (acked + 1) * kBatchItems);
  }
  EXPECT_GT(rounds, 1);

  // The writer is idle: a catch-up sees everything, and a search finds the
  // item written last, exactly.
  ASSERT_TRUE(reader->CatchUp().ok());
  ExpectWholeBatches(reader.get(), 0, kBatches);
  EXPECT_EQ(TopHit(reader.get(), kBatches * kBatchItems - 1), kBatches * kBatchItems - 1);
  EXPECT_EQ(TopHit(reader.get(), 17), 17);
  const CollectionStats st = StatsOf(reader.get(), "c");
  EXPECT_TRUE(st.index_trained);  // trained in the reader's memory
  EXPECT_EQ(st.index_vectors, st.items);

  // Removals disappear after a catch-up, and only then.
  writer.Send(kRemoveFirst);
  ASSERT_EQ(writer.Ack(), -1);
  ExpectWholeBatches(reader.get(), 0, kBatches);
  ASSERT_TRUE(reader->CatchUp().ok());
  ExpectWholeBatches(reader.get(), 1, kBatches);
  EXPECT_NE(TopHit(reader.get(), 17), 17);
  EXPECT_EQ(TopHit(reader.get(), 117), 117);

  // A second reader opened now starts where the writer is.
  std::unique_ptr<DB> second = OpenReader(dir.path(), &warnings);
  ExpectWholeBatches(second.get(), 1, kBatches);
  writer.Stop();
  // The reader outlives the writer, and still catches up (to the last state).
  ASSERT_TRUE(reader->CatchUp().ok());
  ExpectWholeBatches(reader.get(), 1, kBatches);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST(ReadersTest, IndexFileSavedAfterTheReadersViewIsNotLostWrites) {
  TempDir dir;
  CreateDatabase(dir.path());
  Writer writer(dir.path());
  writer.Send(5);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(writer.Ack(), i);
  writer.Send(kFlush);  // trains the index and saves its file at 5 batches
  ASSERT_EQ(writer.Ack(), -1);
  std::vector<std::string> warnings;
  std::unique_ptr<DB> reader = OpenReader(dir.path(), &warnings);
  // Its collection opens on first use, after the writer saved a file that
  // covers more than the reader's view; and after another that lacks items
  // the view still has.
  writer.Send(3);
  for (int i = 5; i < 8; ++i) ASSERT_EQ(writer.Ack(), i);
  writer.Send(kRemoveFirst);
  ASSERT_EQ(writer.Ack(), -1);
  writer.Send(kFlush);
  ASSERT_EQ(writer.Ack(), -1);
  ExpectWholeBatches(reader.get(), 0, 5);
  CollectionStats st = StatsOf(reader.get(), "c");
  EXPECT_TRUE(st.lost_writes.empty()) << st.lost_writes;
  EXPECT_TRUE(st.index_trained);
  EXPECT_EQ(TopHit(reader.get(), 17), 17);  // removed by the writer, not in the file
  EXPECT_EQ(TopHit(reader.get(), 499), 499);
  ASSERT_TRUE(reader->CatchUp().ok());
  ExpectWholeBatches(reader.get(), 1, 8);
  EXPECT_EQ(TopHit(reader.get(), 799), 799);
  EXPECT_NE(TopHit(reader.get(), 17), 17);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST(ReadersTest, ASecondWriterIsToldTheDatabaseIsLocked) {
  TempDir dir;
  CreateDatabase(dir.path());
  Writer writer(dir.path());
  std::unique_ptr<DB> db;
  const Status s = DB::Open(Options(), dir.path(), &db);
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("database " + dir.path() + " is locked by another process (pid " +
                             std::to_string(writer.pid()) + ")"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("open it read-only"), std::string::npos) << s.ToString();
  writer.Stop();
  // Free again once the writer closed it.
  EXPECT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
  // The same process opening it twice is told so too.
  std::unique_ptr<DB> twice;
  const Status again = DB::Open(Options(), dir.path(), &twice);
  EXPECT_NE(again.message().find("database " + dir.path() + " is already open in this process"),
            std::string::npos)
      << again.ToString();
}

TEST(ReadersTest, WritesOnAReaderAreRefused) {
  TempDir dir;
  CreateDatabase(dir.path());
  {
    std::unique_ptr<DB> db = OpenDb(dir.path());
    ASSERT_TRUE(db->Ingest("c", BatchNumber(0).ingest(), nullptr).ok());
  }
  std::vector<std::string> warnings;
  std::unique_ptr<DB> reader = OpenReader(dir.path(), &warnings);
  const std::string expected = "database " + dir.path() + " is open read-only";
  auto refused = [&](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Status::Code::kNotSupported) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << what << ": " << s.ToString();
  };
  const testing::Batch b = BatchNumber(1);
  refused(reader->Ingest("c", b.ingest(), nullptr), "ingest");
  const int64_t id = 3;
  refused(reader->Remove("c", &id, 1, nullptr), "remove");
  CollectionSpec other = Spec();
  other.name = "d";
  refused(reader->CreateCollection(other), "create");
  refused(reader->DropCollection("c"), "drop");
  CalibrateOptions co;
  refused(reader->Calibrate("c", co, nullptr), "calibrate");
  refused(reader->ImportCalibration("c", "bytes", 0), "import calibration");
  refused(reader->RemoveCalibration("c", ScoreType::kDefault), "remove calibration");
  refused(reader->Flush(), "flush");
  ExpectWholeBatches(reader.get(), 0, 1);  // nothing changed
  // Reads and checks work.
  VerifyReport report;
  ASSERT_TRUE(reader->Verify("", &report).ok());
  EXPECT_TRUE(report.ok());
  // No database there: a reader creates none.
  TempDir empty;
  Options options;
  options.read_only = true;
  std::unique_ptr<DB> none;
  EXPECT_TRUE(DB::Open(options, empty.path() + "/nothing", &none).IsNotFound());
  EXPECT_FALSE(std::filesystem::exists(empty.path() + "/nothing"));
}

// Every file under `dir` with its size and modification time.
std::map<std::string, std::pair<uintmax_t, int64_t>> Listing(const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, int64_t>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st;
    EXPECT_EQ(::stat(e.path().c_str(), &st), 0);
    const int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    out[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, mtime};
  }
  return out;
}

TEST(ReadersTest, AReaderWritesNothing) {
  TempDir dir;
  CreateDatabase(dir.path());
  {
    std::unique_ptr<DB> db = OpenDb(dir.path());
    for (int64_t b = 0; b < 6; ++b)
      ASSERT_TRUE(db->Ingest("c", BatchNumber(b).ingest(), nullptr).ok());
  }
  // Without its index file, a writer would rebuild and save it; a reader
  // rebuilds it in memory only.
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/index")) {
    std::filesystem::remove(e.path());
  }
  const auto before = Listing(dir.path());
  {
    std::vector<std::string> warnings;
    std::unique_ptr<DB> reader = OpenReader(dir.path(), &warnings);
    ExpectWholeBatches(reader.get(), 0, 6);
    EXPECT_EQ(TopHit(reader.get(), 250), 250);
    EXPECT_TRUE(StatsOf(reader.get(), "c").index_trained);
    ASSERT_TRUE(reader->CatchUp().ok());
    std::vector<std::string> names;
    ASSERT_TRUE(reader->ListCollections(&names).ok());
    EXPECT_EQ(names, std::vector<std::string>{"c"});
  }
  EXPECT_EQ(Listing(dir.path()), before);
}

}  // namespace
}  // namespace hedgedb
