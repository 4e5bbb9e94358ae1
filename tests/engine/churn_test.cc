// A collection whose items drift (old clusters removed, new ones inserted)
// checks its IVF index and retrains it (Options::index_recheck_fraction,
// index_retrain_recall, index_upkeep_inline; query/index_keeper.h): recall
// falls without the upkeep and is restored with it; searches and writes go
// on during a background retrain; closing during one loses nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"
#include "query/collection.h"

namespace hedgedb {
namespace testing {
namespace {

constexpr int kDim = 16;
constexpr int64_t kLive = 12000;  // IVF256 trains at 39 x 256 = 9,984 items
constexpr int kRounds = 10;       // each replaces a tenth of the items

CollectionSpec DriftSpec(RowFormat format = RowFormat::kFloat32) {
  CollectionSpec spec;
  spec.row_format = format;
  spec.name = "drift";
  spec.kind = Kind::kGaussian;
  spec.dim = kDim;
  spec.index_factory = "IVF256,Flat";
  spec.match_a = 1.0f;
  spec.match_b = 5.0f;
  return spec;
}

// Gaussians around 30 cluster centres: the items before and after the drift
// come from two independent sets of centres in the same region, so that the
// lists trained on the first split the clusters of the second.
struct Drift {
  std::mt19937_64 rng{7};
  std::vector<float> before, after;  // 30 x kDim centres each

  Drift() {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int i = 0; i < 30 * kDim; ++i) before.push_back(normal(rng));
    for (int i = 0; i < 30 * kDim; ++i) after.push_back(normal(rng));
  }
  Batch Draw(const std::vector<float>& centres, int64_t n, int64_t first_id) {
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::uniform_real_distribution<float> var(0.02f, 0.2f);
    std::uniform_int_distribution<int> cluster(0, 29);
    Batch b;
    b.n = n;
    for (int64_t i = 0; i < n; ++i) {
      const int c = cluster(rng);
      b.ids.push_back(first_id + i);
      for (int d = 0; d < kDim; ++d) {
        b.mean.push_back(centres[size_t(c * kDim + d)] + normal(rng));
        b.var.push_back(var(rng));
      }
    }
    return b;
  }
};

void Ingest(DB* db, const Batch& b) {
  const Status s = db->Ingest("drift", b.ingest(), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

void RemoveRange(DB* db, int64_t first, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first + i);
  const Status s = db->Remove("drift", ids.data(), ids.size(), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// The recall@10 of a search at nprobe 8 (this index's static default) and
// 100 candidates against the exhaustive top-10: the knobs held where the
// lists limit stage 1, so that the drift shows. (The default search's fit,
// query/knob_fit.h, chooses a wider probe at this size, where probing is
// cheap next to rescoring, and then finds 0.971 of the drifted top-10
// without the upkeep.)
double RecallAt10(DB* db, const Batch& queries) {
  SearchOptions options;
  options.k = 10;
  options.nprobe = 8;
  options.oversampling = kDefaultOversampling;
  options.with_uncertainty = false;
  std::vector<SearchResult> found, exact;
  EXPECT_TRUE(db->Search("drift", queries.view(), options, &found).ok());
  options.exhaustive = true;
  EXPECT_TRUE(db->Search("drift", queries.view(), options, &exact).ok());
  int64_t hits = 0, total = 0;
  for (size_t q = 0; q < exact.size(); ++q) {
    std::set<int64_t> truth;
    for (const SearchHit& h : exact[q].hits) truth.insert(h.id);
    total += int64_t(truth.size());
    for (const SearchHit& h : found[q].hits) hits += truth.count(h.id);
  }
  return total ? double(hits) / double(total) : 1.0;
}

// kLive items of the first centres (trained on at the flush), then kRounds
// rounds that each insert a tenth from the new centres and remove the oldest
// tenth. Returns queries of the new centres.
Batch RunDrift(DB* db, Drift* drift, RowFormat format = RowFormat::kFloat32) {
  EXPECT_TRUE(db->CreateCollection(DriftSpec(format)).ok());
  Ingest(db, drift->Draw(drift->before, kLive, 0));
  EXPECT_TRUE(db->Flush().ok());
  const int64_t step = kLive / kRounds;
  for (int r = 0; r < kRounds; ++r) {
    Ingest(db, drift->Draw(drift->after, step, kLive + r * step));
    RemoveRange(db, r * step, step);
  }
  return drift->Draw(drift->after, 200, 1000000);
}

TEST(ChurnTest, DriftLowersRecallAndTheRetrainRestoresIt) {
  double without = 0, with = 0;
  {
    TempDir dir;
    Options options;
    options.index_recheck_fraction = 0;  // no upkeep: the lists stay as trained
    auto db = OpenDb(dir.path(), options);
    Drift drift;
    const Batch queries = RunDrift(db.get(), &drift);
    without = RecallAt10(db.get(), queries);
    const CollectionStats st = StatsOf(db.get(), "drift");
    std::printf("fitted at training: nprobe %d, %lld candidates\n", st.index_nprobe,
                (long long)st.index_candidates);
    EXPECT_EQ(st.index_retrains, 0);
    EXPECT_EQ(st.index_checked_sequence, 0u);
    EXPECT_EQ(st.index_changes_since_check, 2 * kLive);
  }
  {
    TempDir dir;
    Options options;
    options.index_upkeep_inline = true;  // deterministic: inside the write
    auto db = OpenDb(dir.path(), options);
    Drift drift;
    const Batch queries = RunDrift(db.get(), &drift);
    with = RecallAt10(db.get(), queries);
    const CollectionStats st = StatsOf(db.get(), "drift");
    EXPECT_GE(st.index_retrains, 1);
    EXPECT_GT(st.index_retrained_sequence, 1u);
    EXPECT_GT(st.index_retrained_time, 0);
    EXPECT_GE(st.index_checked_sequence, st.index_retrained_sequence);
    EXPECT_FALSE(st.index_retraining);
    EXPECT_NE(st.index_retrain_reason.find("recall estimate"), std::string::npos)
        << st.index_retrain_reason;
    EXPECT_NE(st.index_retrain_reason.find(" changes"), std::string::npos);
    EXPECT_FALSE(st.index_upkeep_note.empty());
    EXPECT_GE(st.index_recall_estimate, 0.95);
    EXPECT_EQ(st.index_vectors, kLive);  // the new index holds exactly the live items
    // The retrained index file was saved at the sequence it covered; a
    // reopen loads it (or catches it up) with the same vectors.
    EXPECT_GT(st.index_sequence, 1u);
    db.reset();
    db = OpenDb(dir.path(), options);
    const CollectionStats reopened = StatsOf(db.get(), "drift");
    EXPECT_EQ(reopened.index_note, "");
    EXPECT_EQ(reopened.index_vectors, kLive);
    EXPECT_NEAR(RecallAt10(db.get(), queries), with, 1e-12);  // same index, same answers
  }
  std::printf("recall@10 after the drift: %.4f without the upkeep, %.4f with it\n", without, with);
  EXPECT_LT(without, 0.93);
  EXPECT_GE(with, 0.97);
}

// The check and the retrain on a float16 collection (their sampled items are
// widened to float rows before they serve as queries): the drift is caught
// and the retrained index serves the new items as with float32 rows.
TEST(ChurnTest, TheRetrainWorksOnCompactRows) {
  TempDir dir;
  Options options;
  options.index_upkeep_inline = true;
  auto db = OpenDb(dir.path(), options);
  Drift drift;
  const Batch queries = RunDrift(db.get(), &drift, RowFormat::kFloat16);
  const CollectionStats st = StatsOf(db.get(), "drift");
  EXPECT_GE(st.index_retrains, 1);
  EXPECT_GE(st.index_recall_estimate, 0.95);
  EXPECT_EQ(st.index_vectors, kLive);
  EXPECT_GE(RecallAt10(db.get(), queries), 0.97);
}

TEST(ChurnTest, OptionsOutOfRangeAreRefused) {
  TempDir dir;
  std::unique_ptr<DB> db;
  Options options;
  options.index_recheck_fraction = -0.5;
  Status s = DB::Open(options, dir.path(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("index_recheck_fraction"), std::string::npos);
  options = Options();
  options.index_retrain_recall = 1.5;
  s = DB::Open(options, dir.path(), &db);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("index_retrain_recall"), std::string::npos);
}

// Holds the background retrain at one step until released.
class StepGate {
 public:
  explicit StepGate(std::string step) : step_(std::move(step)) {
    query::Collection::SetUpkeepHookForTest([this](const char* step) { At(step); });
  }
  ~StepGate() {
    Release();
    query::Collection::SetUpkeepHookForTest(nullptr);
  }
  void At(const char* step) {
    std::unique_lock<std::mutex> lock(mutex_);
    steps_.push_back(step);
    cv_.notify_all();
    if (step_ == step) cv_.wait(lock, [&] { return released_; });
  }
  // Waits (up to a minute) until `step` was reached.
  bool WaitFor(const std::string& step) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::minutes(1), [&] {
      return std::find(steps_.begin(), steps_.end(), step) != steps_.end();
    });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<std::string> steps() {
    std::lock_guard<std::mutex> lock(mutex_);
    return steps_;
  }

 private:
  const std::string step_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<std::string> steps_;
};

// Each item of `b` is its own nearest neighbour: a search for it finds it
// first (or, if `present` is false, not at all).
void ExpectFound(DB* db, const Batch& b, bool present) {
  SearchOptions options;
  options.k = 10;
  options.with_uncertainty = false;
  std::vector<SearchResult> results;
  const Status s = db->Search("drift", b.view(), options, &results);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (int64_t i = 0; i < b.n; ++i) {
    bool found = false;
    for (const SearchHit& h : results[size_t(i)].hits) found |= h.id == b.ids[size_t(i)];
    EXPECT_EQ(found, present) << "item " << b.ids[size_t(i)];
  }
}

// Reaches a background retrain (the upkeep thread) and holds it after its
// training: the drift, with upkeep in the background.
std::unique_ptr<DB> DriftUntilRetraining(const std::string& path, StepGate* gate, Drift* drift) {
  auto db = OpenDb(path);  // default options: background upkeep
  EXPECT_TRUE(db->CreateCollection(DriftSpec()).ok());
  Ingest(db.get(), drift->Draw(drift->before, kLive, 0));
  EXPECT_TRUE(db->Flush().ok());
  const int64_t step = kLive / kRounds;
  int64_t removed = 0;
  for (int r = 0; r < kRounds; ++r) {
    Ingest(db.get(), drift->Draw(drift->after, step, kLive + r * step));
    RemoveRange(db.get(), removed, step);
    removed += step;
    if (StatsOf(db.get(), "drift").index_retraining) break;
  }
  EXPECT_TRUE(gate->WaitFor("trained"));
  EXPECT_TRUE(StatsOf(db.get(), "drift").index_retraining);
  return db;
}

TEST(ChurnTest, SearchesAndWritesGoOnDuringABackgroundRetrain) {
  TempDir dir;
  StepGate gate("trained");
  Drift drift;
  auto db = DriftUntilRetraining(dir.path(), &gate, &drift);
  const CollectionStats before = StatsOf(db.get(), "drift");
  // While the new index waits: writes commit and searches answer from the
  // old index, seeing those writes.
  const Batch added = drift.Draw(drift.after, 500, 5000000);
  Ingest(db.get(), added);
  ExpectFound(db.get(), added, true);
  std::vector<int64_t> live;
  ASSERT_TRUE(db->ListIds("drift", &live).ok());
  const int64_t victim_first = live.front();
  RemoveRange(db.get(), victim_first, 300);  // the oldest live ones
  Batch upserted = drift.Draw(drift.after, 50, 0);
  for (int64_t i = 0; i < upserted.n; ++i) upserted.ids[size_t(i)] = victim_first + 300 + i;
  IngestBatch up = upserted.ingest();
  up.upsert = true;
  ASSERT_TRUE(db->Ingest("drift", up, nullptr).ok());
  ExpectFound(db.get(), upserted, true);
  gate.Release();
  ASSERT_TRUE(gate.WaitFor("adopted")) << "steps: " << gate.steps().size();
  const CollectionStats after = StatsOf(db.get(), "drift");
  EXPECT_EQ(after.index_retrains, before.index_retrains + 1);
  EXPECT_FALSE(after.index_retraining);
  // The new index caught up with what was written during the retrain:
  // every live item once, nothing removed.
  EXPECT_EQ(after.index_vectors, after.items);
  ExpectFound(db.get(), added, true);
  ExpectFound(db.get(), upserted, true);
  std::vector<Record> records;
  std::vector<int64_t> gone_ids;
  for (int64_t i = 0; i < 300; ++i) gone_ids.push_back(victim_first + i);
  ASSERT_TRUE(db->Get("drift", gone_ids.data(), gone_ids.size(), &records).ok());
  for (const Record& r : records) EXPECT_FALSE(r.found);
  // The old vectors of the removed and the upserted ids are gone from the
  // new index too (index_vectors == items above).
  EXPECT_EQ(after.items, int64_t(live.size()) - 300);
  db.reset();
  db = OpenDb(dir.path());
  const CollectionStats reopened = StatsOf(db.get(), "drift");
  EXPECT_EQ(reopened.items, after.items);
  EXPECT_EQ(reopened.index_vectors, after.items);
  EXPECT_EQ(reopened.index_note, "");
  VerifyReport report;
  ASSERT_TRUE(db->Verify("drift", &report).ok());
  EXPECT_TRUE(report.ok());
}

// Closing the database while the retrain is held after its training: the
// close waits for the upkeep thread, which gives the retrain up; the index
// file on disk is the old one, caught up on reopen; no write is lost.
TEST(ChurnTest, CloseDuringARetrainAbandonsItAndLosesNothing) {
  TempDir dir;
  StepGate gate("trained");
  Drift drift;
  auto db = DriftUntilRetraining(dir.path(), &gate, &drift);
  const Batch added = drift.Draw(drift.after, 200, 5000000);
  Ingest(db.get(), added);
  const int64_t items = StatsOf(db.get(), "drift").items;
  std::thread release([&] {
    // Let the close reach the join first (a retrain that resumed before
    // the close would be adopted instead: also correct, but not this test).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    gate.Release();
  });
  db.reset();  // flushes, then joins the upkeep thread
  release.join();
  const auto steps = gate.steps();
  EXPECT_EQ(steps.back(), "abandoned");
  db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "drift");
  EXPECT_EQ(st.items, items);
  EXPECT_EQ(st.index_vectors, items);
  EXPECT_EQ(st.index_note, "");
  ExpectFound(db.get(), added, true);
  VerifyReport report;
  ASSERT_TRUE(db->Verify("drift", &report).ok());
  EXPECT_TRUE(report.ok());
}

// The retrain holds the write lock while it saves its file: a close that
// comes then waits for it, and the saved new index is what reopens.
TEST(ChurnTest, CloseWhileTheRetrainSavesWaitsForIt) {
  TempDir dir;
  StepGate gate("saving");
  Drift drift;
  auto db = OpenDb(dir.path());
  ASSERT_TRUE(db->CreateCollection(DriftSpec()).ok());
  Ingest(db.get(), drift.Draw(drift.before, kLive, 0));
  ASSERT_TRUE(db->Flush().ok());
  const int64_t step = kLive / kRounds;
  for (int r = 0; r < kRounds && !StatsOf(db.get(), "drift").index_retraining; ++r) {
    Ingest(db.get(), drift.Draw(drift.after, step, kLive + r * step));
    RemoveRange(db.get(), r * step, step);
  }
  ASSERT_TRUE(gate.WaitFor("saving"));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    gate.Release();
  });
  db.reset();
  release.join();
  EXPECT_EQ(gate.steps().back(), "adopted");
  db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "drift");
  EXPECT_EQ(st.index_note, "");
  EXPECT_EQ(st.index_vectors, st.items);
  EXPECT_GE(st.index_recall_estimate, 0.95);  // the new index's, from its file
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
