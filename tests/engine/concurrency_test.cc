// Many concurrent searches with one writer (and a remover) must be safe: no
// errors, no torn results, and the final state is exactly what was written.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::RandomBatch;
using testing::TempDir;

TEST(ConcurrencyTest, SearchersWhileWriting) {
  TempDir dir;
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "HNSW16");
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 500, 0, 1).ingest(), nullptr).ok());

  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::atomic<int64_t> searches{0};
  testing::FirstCalls first_calls;
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      bool made = false;
      testing::Batch q = testing::QueryBatch(spec, 2, 100 + t);
      SearchOptions opt;
      opt.k = 5;
      opt.ef_search = (t % 2) ? 64 : 0;  // mixed knobs exercise the knob lock
      while (!done) {
        std::vector<SearchResult> res;
        Status s = db->Search("c", q.view(), opt, &res);
        if (!s.ok() || res.size() != 2 || res[0].hits.size() != 5) ++failures;
        for (const auto& r : res) {
          for (size_t j = 1; j < r.hits.size(); ++j) {
            if (r.hits[j - 1].score < r.hits[j].score) ++failures;
          }
        }
        ++searches;
        first_calls.Made(&made);
      }
    });
  }
  first_calls.WaitFor(4);
  for (int b = 1; b <= 20; ++b) {
    ASSERT_TRUE(
        db->Ingest("c", RandomBatch(spec, 50, 500 + 50 * (b - 1), b).ingest(), nullptr).ok());
    std::vector<int64_t> gone = {int64_t(b)};
    ASSERT_TRUE(db->Remove("c", gone.data(), 1, nullptr).ok());
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(searches.load(), 0);
  CollectionStats st;
  ASSERT_TRUE(db->GetStats("c", &st).ok());
  EXPECT_EQ(st.items, 500 + 20 * 50 - 20);
}

}  // namespace
}  // namespace hedgedb
