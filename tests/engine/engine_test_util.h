// Helpers shared by the engine tests: temp directories, opened databases and
// (from batches.h) generated batches.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batches.h"
#include "hedgedb/db.h"

namespace hedgedb {
namespace testing {

// A fresh directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hedgedb-test-XXXXXX").string();
    path_ = ::mkdtemp(&tmpl[0]);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Opens (creating) the database at `path`; a failure fails the test.
inline std::unique_ptr<DB> OpenDb(const std::string& path, Options options = Options()) {
  std::unique_ptr<DB> db;
  Status s = DB::Open(options, path, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

// The collection's stats; a failure fails the test.
inline CollectionStats StatsOf(DB* db, const std::string& name) {
  CollectionStats st;
  Status s = db->GetStats(name, &st);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return st;
}

// The recall of a search against the exhaustive search: the fraction of
// the exhaustive top-k (k = options.k) of `queries` in `collection` that a
// search with `options` returns. The exhaustive search is `options` with
// exhaustive set (the candidates, oversampling and stage-1 knobs do not
// apply to it). With `leave_out` (one id per query: the query's own item),
// that id is dropped from both rankings, which then count their first
// k - 1 other items: the recall@(k - 1) the default search's fit estimates
// (query/knob_fit.h). A failed search fails the test.
inline double RecallAgainstExhaustive(DB* db, const std::string& collection, const Batch& queries,
                                      const SearchOptions& options,
                                      const std::vector<int64_t>* leave_out = nullptr) {
  SearchOptions all = options;
  all.exhaustive = true;
  all.candidates = 0;
  all.oversampling = 0;
  all.nprobe = 0;
  all.ef_search = 0;
  std::vector<SearchResult> found, exact;
  Status s = db->Search(collection, queries.view(), options, &found);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = db->Search(collection, queries.view(), all, &exact);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (found.size() != exact.size() || (leave_out && leave_out->size() != exact.size())) {
    ADD_FAILURE() << "results for " << found.size() << " and " << exact.size() << " queries";
    return 0;
  }
  // A ranking's ids, without the query's own, up to `wanted`.
  auto ids_of = [&](const SearchResult& r, size_t q) {
    const size_t wanted = leave_out ? size_t(std::max(0, options.k - 1)) : size_t(options.k);
    std::vector<int64_t> ids;
    for (const SearchHit& h : r.hits) {
      if (ids.size() >= wanted) break;
      if (leave_out && h.id == (*leave_out)[q]) continue;
      ids.push_back(h.id);
    }
    return ids;
  };
  int64_t hits = 0, total = 0;
  for (size_t q = 0; q < exact.size(); ++q) {
    const std::vector<int64_t> truth_ids = ids_of(exact[q], q);
    const std::set<int64_t> truth(truth_ids.begin(), truth_ids.end());
    total += int64_t(truth.size());
    for (int64_t id : ids_of(found[q], q)) hits += int64_t(truth.count(id));
  }
  return total ? double(hits) / double(total) : 1.0;
}

// The threads of a concurrency test that have made their first call: the
// main thread waits for all of them before its writes, so that the writes
// run beside calls however a loaded machine schedules the threads (six
// flushes can otherwise end before any thread has run).
class FirstCalls {
 public:
  // After each call of a thread; `made` is the thread's own flag.
  void Made(bool* made) {
    if (*made) return;
    *made = true;
    ++count_;
  }
  void WaitFor(int threads) const {
    while (count_.load() < threads) std::this_thread::yield();
  }

 private:
  std::atomic<int> count_{0};
};

}  // namespace testing
}  // namespace hedgedb
