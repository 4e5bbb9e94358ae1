// Upsert: replacing existing items is one atomic batch, the arena and the
// coarse index follow, and a SIGKILL mid-upsert leaves each id with its old
// or its new item, never a mix and never nothing.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>

#include "child_process.h"
#include "engine_test_util.h"

namespace hedgedb {
namespace testing {
namespace {

constexpr int kDim = 8;

// A batch of `ids` with label `version`, payload "v<version>", and means
// within 0.3 of `version` in every coordinate.
struct VersionedBatch {
  std::vector<int64_t> ids, labels;
  std::vector<float> mean, var;
  std::vector<std::string> payloads;
  VersionedBatch(const std::vector<int64_t>& item_ids, int64_t version) : ids(item_ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      labels.push_back(version);
      payloads.push_back("v" + std::to_string(version));
      for (int d = 0; d < kDim; ++d) {
        // Distinct points around `version` (HNSW graphs degrade on duplicates).
        mean.push_back(float(version) + 0.3f * std::sin(float(ids[i]) * 7.31f + float(d) * 1.7f));
        var.push_back(0.1f);
      }
    }
  }
  std::vector<float> mean_of(size_t i) const {
    return std::vector<float>(mean.begin() + i * kDim, mean.begin() + (i + 1) * kDim);
  }
  IngestBatch batch(bool upsert) const {
    IngestBatch b;
    b.data.n = int64_t(ids.size());
    b.data.mean = mean.data();
    b.data.var = var.data();
    b.ids = ids.data();
    b.labels = labels.data();
    b.payloads = payloads.data();
    b.upsert = upsert;
    return b;
  }
};

std::vector<int64_t> Range(int64_t first, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = first; i < first + n; ++i) ids.push_back(i);
  return ids;
}

class UpsertTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UpsertTest, ReplacesRecordsLabelsPayloadsAndIndexEntries) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, kDim, GetParam());
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  const VersionedBatch v1(Range(0, 3000), 1);
  ASSERT_TRUE(db->Ingest("c", v1.batch(false), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());  // trains the index and saves its file

  // Without upsert an existing id is refused, naming upsert; upsert needs ids.
  Status s = db->Ingest("c", v1.batch(false), nullptr);
  EXPECT_TRUE(s.IsAlreadyExists()) << s.ToString();
  EXPECT_NE(s.ToString().find("upsert"), std::string::npos);
  IngestBatch no_ids = v1.batch(true);
  no_ids.ids = nullptr;
  EXPECT_TRUE(db->Ingest("c", no_ids, nullptr).IsInvalidArgument());

  // Replace ids 0..99 (version 50) and add 3000..3009.
  std::vector<int64_t> ids = Range(0, 100);
  for (int64_t id = 3000; id < 3010; ++id) ids.push_back(id);
  VersionedBatch v50(ids, 50);
  v50.payloads[1].clear();  // an empty payload replaces "v1"
  IngestBatch up = v50.batch(true);
  IngestResult result;
  ASSERT_TRUE(db->Ingest("c", up, nullptr, &result).ok());
  EXPECT_EQ(result.replaced, 100);
  // Ids 100..109 replaced without labels or payloads keep none.
  VersionedBatch bare(Range(100, 10), 60);
  IngestBatch bare_batch = bare.batch(true);
  bare_batch.labels = nullptr;
  bare_batch.payloads = nullptr;
  ASSERT_TRUE(db->Ingest("c", bare_batch, nullptr, &result).ok());
  EXPECT_EQ(result.replaced, 10);

  auto check = [&](DB* d) {
    CollectionStats st = StatsOf(d, "c");
    EXPECT_EQ(st.items, 3010);
    std::vector<int64_t> probe = {0, 1, 99, 100, 109, 110, 2999, 3000, 3009};
    std::vector<Record> recs;
    ASSERT_TRUE(d->Get("c", probe.data(), probe.size(), &recs).ok());
    for (const Record& r : recs) ASSERT_TRUE(r.found) << r.id;
    EXPECT_EQ(recs[0].label, 50);
    EXPECT_EQ(recs[0].payload, "v50");
    EXPECT_EQ(recs[0].mean, v50.mean_of(0));
    EXPECT_EQ(recs[1].payload, "");
    EXPECT_EQ(recs[2].label, 50);
    EXPECT_FALSE(recs[3].has_label);
    EXPECT_EQ(recs[3].payload, "");
    EXPECT_NEAR(recs[4].mean[0], 60.0f, 0.3f);
    EXPECT_EQ(recs[5].label, 1);
    EXPECT_EQ(recs[6].payload, "v1");
    EXPECT_EQ(recs[7].label, 50);
    // Two-stage search finds the new vectors, and never an old one: a query
    // at version 50 returns replaced or added ids, each once.
    const VersionedBatch q(Range(0, 1), 50);
    EmbeddingView view;
    view.n = 1;
    view.mean = q.mean.data();
    view.var = q.var.data();
    SearchOptions o;
    o.k = 20;
    std::vector<SearchResult> res, exact;
    ASSERT_TRUE(d->Search("c", view, o, &res).ok());
    o.exhaustive = true;
    ASSERT_TRUE(d->Search("c", view, o, &exact).ok());
    std::set<int64_t> seen;
    for (const SearchHit& h : res[0].hits) {
      EXPECT_TRUE(seen.insert(h.id).second) << "id " << h.id << " twice";
      EXPECT_EQ(h.label, 50) << h.id;
    }
    ASSERT_EQ(res[0].hits.size(), 20u);
    for (size_t j = 0; j < 20; ++j) EXPECT_EQ(res[0].hits[j].id, exact[0].hits[j].id);
    // A filter on the payload sees the replaced payloads.
    o.exhaustive = false;
    o.filter.payload_equals = {{"x", "1"}};
    ASSERT_TRUE(d->Search("c", view, o, &res).ok());
    EXPECT_EQ(res[0].passing, 0);
    VerifyReport report;
    ASSERT_TRUE(d->Verify("c", &report).ok());
    EXPECT_TRUE(report.ok()) << (report.problems.empty() ? "" : report.problems[0].detail);
  };
  check(db.get());
  // Reopen with the index file saved before the upserts (caught up), then
  // with one saved after them.
  db.reset();
  db = OpenDb(dir.path());
  check(db.get());
  ASSERT_TRUE(db->Flush().ok());
  db.reset();
  db = OpenDb(dir.path());
  check(db.get());
}

INSTANTIATE_TEST_SUITE_P(Indexes, UpsertTest, ::testing::Values("IVF16,Flat", "HNSW16", "Flat"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), ',', '_');
                           return name;
                         });

// A token makes an upsert's retry safe, like an insert's; the same token on
// the same items without upsert is a different batch.
TEST(UpsertTokenTest, RetryOfAnUpsertIsAReplay) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kGaussian, kDim)).ok());
  ASSERT_TRUE(db->Ingest("c", VersionedBatch(Range(0, 10), 1).batch(false), nullptr).ok());
  const VersionedBatch v2(Range(0, 10), 2);
  IngestBatch b = v2.batch(true);
  b.token = "t1";
  IngestResult r;
  ASSERT_TRUE(db->Ingest("c", b, nullptr, &r).ok());
  EXPECT_EQ(r.replaced, 10);
  const uint64_t sequence = StatsOf(db.get(), "c").sequence;
  ASSERT_TRUE(db->Ingest("c", b, nullptr, &r).ok());
  EXPECT_TRUE(r.replayed);
  EXPECT_EQ(StatsOf(db.get(), "c").sequence, sequence);
  b.upsert = false;
  EXPECT_TRUE(db->Ingest("c", b, nullptr, &r).IsInvalidArgument());
}

// While one thread upserts, Get and Search --with-payload never pair an
// item's vector and label with another version's payload.
TEST(UpsertTokenTest, ReadersNeverMixVersionsOfAnItem) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kGaussian, kDim, "Flat")).ok());
  ASSERT_TRUE(db->Ingest("c", VersionedBatch(Range(0, 4), 0).batch(false), nullptr).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int64_t version = 1; version <= 400; ++version) {
      if (!db->Ingest("c", VersionedBatch(Range(0, 4), version).batch(true), nullptr).ok()) break;
    }
    done = true;
  });
  const VersionedBatch q(Range(0, 1), 0);
  EmbeddingView view;
  view.n = 1;
  view.mean = q.mean.data();
  view.var = q.var.data();
  SearchOptions o;
  o.k = 4;
  o.with_payload = true;
  o.with_uncertainty = false;
  int64_t checks = 0;
  while (!done) {
    const int64_t id = checks % 4;
    std::vector<Record> recs;
    ASSERT_TRUE(db->Get("c", &id, 1, &recs).ok());
    ASSERT_TRUE(recs[0].found);
    ASSERT_EQ(recs[0].payload, "v" + std::to_string(recs[0].label));
    std::vector<SearchResult> res;
    ASSERT_TRUE(db->Search("c", view, o, &res).ok());
    for (const SearchHit& h : res[0].hits) ASSERT_EQ(h.payload, "v" + std::to_string(h.label));
    ++checks;
  }
  writer.join();
  EXPECT_GT(checks, 0);
}

constexpr int64_t kCrashItems = 300;

// Runs only inside the crash test's child: upserts all kCrashItems ids with
// version 1, 2, ... until killed, acknowledging each version on a pipe.
TEST(UpsertCrashChild, UpsertUntilKilled) {
  const char* db_path = std::getenv("HEDGEDB_UPSERT_DB");
  const char* ack_fd_text = std::getenv("HEDGEDB_UPSERT_ACK_FD");
  if (!db_path || !ack_fd_text) GTEST_SKIP() << "only runs as the upsert crash test's child";
  const int ack_fd = std::atoi(ack_fd_text);
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), db_path, &db).ok());
  for (int64_t version = 1;; ++version) {
    const VersionedBatch b(Range(0, kCrashItems), version);
    if (!db->Ingest("c", b.batch(true), nullptr).ok()) std::abort();
    if (::write(ack_fd, &version, sizeof(version)) != sizeof(version)) std::abort();
  }
}

TEST(UpsertCrashTest, SigkillMidUpsertLeavesOldOrNewNeverAMix) {
  std::mt19937 rng(777);
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    {
      auto db = OpenDb(dir.path());
      ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kGaussian, kDim, "IVF4,Flat")).ok());
      ASSERT_TRUE(
          db->Ingest("c", VersionedBatch(Range(0, kCrashItems), 0).batch(false), nullptr).ok());
      ASSERT_TRUE(db->Flush().ok());
    }
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = SpawnSelf(
        {"--gtest_filter=UpsertCrashChild.UpsertUntilKilled"},
        {"HEDGEDB_UPSERT_DB=" + dir.path(), "HEDGEDB_UPSERT_ACK_FD=" + std::to_string(fds[1])},
        fds[0]);
    ASSERT_GT(pid, 0);
    ::close(fds[1]);
    const int64_t wait_acks = 3 + int64_t(rng() % 10);
    int64_t last_ack = 0, ack;
    while (last_ack < wait_acks && ::read(fds[0], &ack, sizeof(ack)) == sizeof(ack)) last_ack = ack;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 5000));
    const int status = KillAndReap(pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself (status " << status << ")";
    while (::read(fds[0], &ack, sizeof(ack)) == sizeof(ack)) last_ack = ack;
    ::close(fds[0]);

    auto db = OpenDb(dir.path());
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(StatsOf(db.get(), "c").items, kCrashItems);
    const std::vector<int64_t> ids = Range(0, kCrashItems);
    std::vector<Record> recs;
    ASSERT_TRUE(db->Get("c", ids.data(), ids.size(), &recs).ok());
    const int64_t version = recs[0].label;
    EXPECT_GE(version, last_ack) << "an acknowledged upsert was lost";
    EXPECT_LE(version, last_ack + 1);
    for (const Record& r : recs) {
      ASSERT_TRUE(r.found) << "id " << r.id << " lost";
      // Every id of the batch at one version, and each record whole.
      EXPECT_EQ(r.label, version) << "id " << r.id;
      EXPECT_EQ(r.payload, "v" + std::to_string(version)) << "id " << r.id;
      EXPECT_EQ(r.mean, VersionedBatch({r.id}, version).mean) << "id " << r.id;
    }
    // The index follows: a search at that version finds its ids.
    const VersionedBatch q(Range(0, 1), version);
    EmbeddingView view;
    view.n = 1;
    view.mean = q.mean.data();
    view.var = q.var.data();
    std::vector<SearchResult> res;
    SearchOptions o;
    o.k = 5;
    ASSERT_TRUE(db->Search("c", view, o, &res).ok());
    ASSERT_EQ(res[0].hits.size(), 5u);
    for (const SearchHit& h : res[0].hits) EXPECT_EQ(h.label, version);
  }
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
