// Closing beside concurrent calls. A database handle is destroyed only after
// its own calls return (the C++ contract; the Python binding's close() waits
// for them, docs/python.md), but the close path itself (Flush: the index
// file and the arena snapshot; the log written into a table) runs beside
// other threads' calls on the same handle, and a writer of another handle
// closes while a reader of the same directory searches, catches up and
// backs up. These tests run those paths concurrently, so that
// scripts/sanitize.sh thread sees them (engine label).
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::OpenDb;
using testing::QueryBatch;
using testing::RandomBatch;
using testing::StatsOf;
using testing::TempDir;

constexpr int64_t kBatch = 100;

// Searches and gets on one handle while another thread ingests and runs
// Flush, which saves the index file and the arena snapshot as a close does;
// then the handle closes and a new one opens from that snapshot.
TEST(CloseTest, SearchesAndGetsWhileFlushSavesWhatACloseSaves) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 8, "IVF4,Flat");
  auto db = OpenDb(dir.path());
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 2 * kBatch, 0, 1).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());

  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::atomic<int64_t> calls{0};
  testing::FirstCalls first_calls;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      bool made = false;
      const testing::Batch q = QueryBatch(spec, 2, 50 + t);
      std::vector<int64_t> ids(2 * kBatch);  // there from the start
      std::iota(ids.begin(), ids.end(), 0);
      while (!done) {
        if (t < 2) {
          SearchOptions opt;
          opt.k = 5;
          std::vector<SearchResult> res;
          const Status s = db->Search("c", q.view(), opt, &res);
          if (!s.ok() || res.size() != 2 || res[0].hits.size() != 5) ++failures;
        } else {
          std::vector<Record> records;
          const Status s = db->Get("c", ids.data(), ids.size(), &records);
          if (!s.ok() || records.size() != ids.size()) {
            ++failures;
          } else {
            for (const Record& r : records) failures += r.found ? 0 : 1;
          }
        }
        ++calls;
        first_calls.Made(&made);
      }
    });
  }
  first_calls.WaitFor(3);
  for (int b = 2; b < 8; ++b) {
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, kBatch, b * kBatch, b).ingest(), nullptr).ok());
    const Status s = db->Flush();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  done = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(calls.load(), 0);
  db.reset();  // closes: Flush, the log into a table

  auto again = OpenDb(dir.path());
  const CollectionStats st = StatsOf(again.get(), "c");
  EXPECT_EQ(st.items, 8 * kBatch);
  EXPECT_EQ(st.arena_source, "snapshot") << st.arena_note;
}

// A reader searches, gets, catches up and backs up in three threads while
// a writer handle of the same directory opens, ingests and closes four
// times. Every call succeeds; the reader sees whole batches only, never
// fewer than before; a backup holds whole batches; after the last close
// the reader catches up to every batch.
TEST(CloseTest, ReaderWorksWhileAWriterClosesAndReopens) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 8, "Flat");
  {
    auto writer = OpenDb(path);
    ASSERT_TRUE(writer->CreateCollection(spec).ok());
    ASSERT_TRUE(writer->Ingest("c", RandomBatch(spec, kBatch, 0, 1).ingest(), nullptr).ok());
  }
  Options ro;
  ro.read_only = true;
  auto reader = OpenDb(path, ro);
  ASSERT_NE(reader, nullptr);

  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::atomic<int> backups{0};
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  threads.emplace_back([&] {  // searches and gets of the first batch
    const testing::Batch q = QueryBatch(spec, 1, 7);
    std::vector<int64_t> ids(kBatch);
    std::iota(ids.begin(), ids.end(), 0);
    while (!done) {
      SearchOptions opt;
      opt.k = 3;
      std::vector<SearchResult> res;
      Status s = reader->Search("c", q.view(), opt, &res);
      if (s.ok() && (res.size() != 1 || res[0].hits.size() != 3)) {
        s = Status::Internal("short result");
      }
      std::vector<Record> records;
      if (s.ok()) s = reader->Get("c", ids.data(), ids.size(), &records);
      for (const Record& r : records) {
        if (s.ok() && !r.found) s = Status::Internal("item " + std::to_string(r.id) + " missing");
      }
      if (!s.ok()) {
        ++failures;
        errors[0] = s.ToString();
      }
    }
  });
  threads.emplace_back([&] {  // catches up: whole batches, never fewer
    int64_t last = kBatch;
    while (!done) {
      Status s = reader->CatchUp();
      CollectionStats st;
      if (s.ok()) s = reader->GetStats("c", &st);
      if (s.ok() && (st.items % kBatch != 0 || st.items < last)) {
        s = Status::Internal("saw " + std::to_string(st.items) + " items after " +
                             std::to_string(last));
      }
      if (!s.ok()) {
        ++failures;
        errors[1] = s.ToString();
      } else {
        last = st.items;
      }
    }
  });
  threads.emplace_back([&] {                            // backs up: whole batches
    for (int n = 0; n < 3 && (n == 0 || !done); ++n) {  // at least one
      BackupResult result;
      const Status s = reader->Backup(dir.path() + "/copy" + std::to_string(n), &result);
      if (!s.ok() || result.collections.size() != 1 || result.collections[0].items % kBatch != 0 ||
          result.collections[0].items < kBatch) {
        ++failures;
        errors[2] =
            s.ok()
                ? "backup of " + std::to_string(result.collections.size()) + " collections, " +
                      (result.collections.empty() ? std::string("-")
                                                  : std::to_string(result.collections[0].items)) +
                      " items"
                : s.ToString();
      }
      ++backups;
    }
  });
  for (int restart = 1; restart <= 4; ++restart) {
    auto writer = OpenDb(path);
    ASSERT_NE(writer, nullptr);
    ASSERT_TRUE(
        writer->Ingest("c", RandomBatch(spec, kBatch, restart * kBatch, restart).ingest(), nullptr)
            .ok());
  }  // each writer closes here, beside the reader's calls
  done = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << errors[0] << " | " << errors[1] << " | " << errors[2];
  EXPECT_GT(backups.load(), 0);
  ASSERT_TRUE(reader->CatchUp().ok());
  EXPECT_EQ(StatsOf(reader.get(), "c").items, 5 * kBatch);
}

}  // namespace
}  // namespace hedgedb
