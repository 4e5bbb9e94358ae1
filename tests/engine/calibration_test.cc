// DB::Calibrate, stored calibrations and threshold search (SearchOptions::
// min_prob): fitting on a collection's labelled pairs, durability across
// reopen and SIGKILL, clear errors that leave the collection unchanged, and
// threshold search against an exhaustive scan.
#include "hedgedb/calibration.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "calibration/metrics.h"
#include "engine_test_util.h"
#include "hedgedb/match_parameters.h"
#include "hedgedb/score.h"
#include "query/match_fit.h"
#include "sanitizer.h"
#include "storage/record_store.h"
#include "tests/calibration/version_one_map.h"

extern char** environ;

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::OpenDb;
using testing::StatsOf;
using testing::TempDir;

// Gaussian items around `classes` class centres, with labels; the noise and
// the variances vary per item, so some items are ambiguous.
testing::Batch ClusteredBatch(const CollectionSpec& spec, int64_t n, int classes, uint64_t seed,
                              int64_t first_id = 0) {
  std::mt19937_64 rng(seed);
  std::mt19937_64 centre_rng(1234);  // the same centres for every batch
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  std::vector<float> centres(size_t(classes) * spec.dim);
  for (float& c : centres) c = 2.0f * normal(centre_rng);
  testing::Batch b;
  b.n = n;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = int64_t(rng() % uint64_t(classes));
    b.ids.push_back(first_id + i);
    b.labels.push_back(label);
    const float noise = 0.3f + 1.5f * uni(rng);
    for (int d = 0; d < spec.dim; ++d) {
      b.mean.push_back(centres[size_t(label) * spec.dim + d] + noise * normal(rng));
      b.var.push_back(0.05f + noise * noise * uni(rng));
    }
  }
  return b;
}

CollectionSpec GaussianSpec(const std::string& factory = "Flat") {
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, factory);
  spec.match_a = 1.0f;
  spec.match_b = 2.0f;
  return spec;
}

std::unique_ptr<DB> DbWith(const TempDir& dir, const CollectionSpec& spec,
                           const testing::Batch& batch, Options options = Options()) {
  std::unique_ptr<DB> db = OpenDb(dir.path(), options);
  EXPECT_TRUE(db->CreateCollection(spec).ok());
  Status s = db->Ingest(spec.name, batch.ingest(), nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

TEST(Calibrate, StoresAMapThatSearchesUseAndThatSurvivesReopen) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  // Every pair is scored: 2.2M pairs, 6x fewer under a sanitizer (which
  // makes the scoring ~35x slower).
  const int64_t n = testing_util::kSanitized ? 600 : 1500;
  const int clusters = 20;
  const testing::Batch items = ClusteredBatch(spec, n, clusters, 1);
  const testing::Batch queries = ClusteredBatch(spec, 50, clusters, 2);
  std::vector<SearchResult> before_calibration;
  {
    std::unique_ptr<DB> db = DbWith(dir, spec, items);
    ASSERT_TRUE(db->Search("c", queries.view(), SearchOptions(), &before_calibration).ok());
    EXPECT_TRUE(std::isnan(before_calibration[0].hits[0].prob));

    CalibrationReport report;
    CalibrateOptions all_pairs;
    all_pairs.max_pairs = n * (n - 1);
    Status s = db->Calibrate("c", all_pairs, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(report.stored);
    EXPECT_EQ(report.info.score, ScoreType::kMc);
    EXPECT_EQ(report.info.samples, 8);
    EXPECT_EQ(report.info.sequence, 1u);
    // Every labelled item against every other: the collection's base rate.
    EXPECT_EQ(report.queries, n);
    EXPECT_EQ(report.info.pairs, n * (n - 1));
    EXPECT_NEAR(report.info.base_rate, 1.0 / clusters, 0.01);
    EXPECT_EQ(int64_t(report.top_matches.size()), report.queries);
    // The raw probability is far off; the held-out calibrated one is not.
    EXPECT_GT(report.before.ece, 0.02);
    EXPECT_LT(report.after.ece, 0.01);
    // Pairwise calibration is conservative for the best match of a query
    // (being ranked first is evidence of its own), but close: within 0.12 at
    // 75 items per cluster (0.14 at 30, the size under a sanitizer).
    std::printf("top-1: mean probability %.3f, precision %.3f\n", report.after.mean_top1_prob,
                report.after.precision_at_1);
    if (!testing_util::kSanitized) {
      EXPECT_NEAR(report.after.mean_top1_prob, report.after.precision_at_1, 0.12);
    }
    EXPECT_EQ(report.after.bins.size(), 15u);
    EXPECT_FALSE(report.info.reason.empty());
  }
  std::unique_ptr<DB> db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "c");
  ASSERT_EQ(st.calibrations.size(), 1u);
  EXPECT_EQ(st.calibrations[0].score, ScoreType::kMc);
  EXPECT_TRUE(st.calibration_note.empty());
  std::vector<SearchResult> results;
  ASSERT_TRUE(db->Search("c", queries.view(), SearchOptions(), &results).ok());
  for (size_t q = 0; q < results.size(); ++q) {
    ASSERT_EQ(results[q].hits.size(), before_calibration[q].hits.size());
    for (size_t j = 0; j < results[q].hits.size(); ++j) {
      const SearchHit& hit = results[q].hits[j];
      // Calibration never changes a ranking or a raw score.
      EXPECT_EQ(hit.id, before_calibration[q].hits[j].id);
      EXPECT_EQ(hit.score, before_calibration[q].hits[j].score);
      ASSERT_TRUE(std::isfinite(hit.prob));
      EXPECT_GE(hit.prob, 0.0f);
      EXPECT_LE(hit.prob, 1.0f);
      // A map of the score alone is monotone, so probabilities fall along
      // the ranking; a conditional one also reads each item's eta, and a
      // less certain item can rank above a likelier match.
      if (j > 0 && !st.calibrations[0].conditional) {
        EXPECT_LE(hit.prob, results[q].hits[j - 1].prob);
      }
    }
  }
  // Another score has no map: NaN, and threshold search on it is refused.
  SearchOptions csd;
  csd.score = ScoreType::kCsd;
  ASSERT_TRUE(db->Search("c", queries.view(), csd, &results).ok());
  EXPECT_TRUE(std::isnan(results[0].hits[0].prob));
  csd.min_prob = 0.5;
  Status s = db->Search("c", queries.view(), csd, &results);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("calibrat"), std::string::npos) << s.ToString();

  // Refit another score, then remove the first map.
  CalibrateOptions other;
  other.score = ScoreType::kCsd;
  ASSERT_TRUE(db->Calibrate("c", other, nullptr).ok());
  EXPECT_EQ(StatsOf(db.get(), "c").calibrations.size(), 2u);
  ASSERT_TRUE(db->RemoveCalibration("c", ScoreType::kDefault).ok());
  EXPECT_TRUE(db->RemoveCalibration("c", ScoreType::kMc).IsNotFound());
  db.reset();
  db = OpenDb(dir.path());
  const CollectionStats after = StatsOf(db.get(), "c");
  ASSERT_EQ(after.calibrations.size(), 1u);
  EXPECT_EQ(after.calibrations[0].score, ScoreType::kCsd);
}

TEST(Calibrate, HeldOutQueriesAndDryRun) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 800, 10, 3));
  const testing::Batch held = ClusteredBatch(spec, 300, 10, 4);
  CalibrateOptions o;
  o.queries = held.view();
  o.query_labels = held.labels.data();
  o.dry_run = true;
  CalibrationReport report;
  Status s = db->Calibrate("c", o, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(report.queries, 300);
  EXPECT_EQ(report.info.pairs, 300 * 800);
  EXPECT_FALSE(report.stored);
  EXPECT_LT(report.after.ece, 0.03);
  EXPECT_TRUE(StatsOf(db.get(), "c").calibrations.empty());
  // max_pairs samples the queries.
  o.dry_run = false;
  o.max_pairs = 100 * 800;
  ASSERT_TRUE(db->Calibrate("c", o, &report).ok());
  EXPECT_EQ(report.queries, 100);
  EXPECT_EQ(StatsOf(db.get(), "c").calibrations.size(), 1u);
  // Labels are required with held-out queries.
  o.query_labels = nullptr;
  EXPECT_TRUE(db->Calibrate("c", o, nullptr).IsInvalidArgument());
}

// Every refused calibration names the problem and stores nothing.
TEST(Calibrate, ClearErrorsLeaveTheCollectionUnchanged) {
  TempDir dir;
  std::unique_ptr<DB> db = OpenDb(dir.path());
  const CollectionSpec spec = GaussianSpec();
  auto expect_refused = [&](const std::string& name, const CalibrateOptions& o,
                            const std::string& words) {
    const CollectionStats before = StatsOf(db.get(), name);
    Status s = db->Calibrate(name, o, nullptr);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.ToString();
    const CollectionStats after = StatsOf(db.get(), name);
    EXPECT_TRUE(after.calibrations.empty());
    EXPECT_EQ(after.items, before.items);
    EXPECT_EQ(after.sequence, before.sequence);
  };
  // No labels.
  CollectionSpec unlabelled = spec;
  unlabelled.name = "unlabelled";
  ASSERT_TRUE(db->CreateCollection(unlabelled).ok());
  testing::Batch b = ClusteredBatch(spec, 300, 5, 5);
  b.labels.clear();
  ASSERT_TRUE(db->Ingest("unlabelled", b.ingest(), nullptr).ok());
  expect_refused("unlabelled", CalibrateOptions(), "labelled items");
  // One label.
  CollectionSpec one = spec;
  one.name = "one";
  ASSERT_TRUE(db->CreateCollection(one).ok());
  b = ClusteredBatch(spec, 300, 1, 6);
  ASSERT_TRUE(db->Ingest("one", b.ingest(), nullptr).ok());
  expect_refused("one", CalibrateOptions(), "same label");
  // Too few pairs.
  CollectionSpec few = spec;
  few.name = "few";
  ASSERT_TRUE(db->CreateCollection(few).ok());
  b = ClusteredBatch(spec, 12, 3, 7);
  ASSERT_TRUE(db->Ingest("few", b.ingest(), nullptr).ok());
  expect_refused("few", CalibrateOptions(), "pairs");
  // Bad options.
  CollectionSpec fine = spec;
  fine.name = "fine";
  ASSERT_TRUE(db->CreateCollection(fine).ok());
  b = ClusteredBatch(spec, 300, 5, 8);
  ASSERT_TRUE(db->Ingest("fine", b.ingest(), nullptr).ok());
  CalibrateOptions bad;
  bad.score = ScoreType::kLogprob;
  expect_refused("fine", bad, "logprob");
  bad = CalibrateOptions();
  bad.max_pairs = 0;
  expect_refused("fine", bad, "max-pairs");
  testing::Batch nan_query = ClusteredBatch(spec, 5, 5, 9);
  nan_query.mean[3] = std::nanf("");
  bad = CalibrateOptions();
  bad.queries = nan_query.view();
  bad.query_labels = nan_query.labels.data();
  expect_refused("fine", bad, "not finite");
  EXPECT_TRUE(db->Calibrate("nope", CalibrateOptions(), nullptr).IsNotFound());
  // Codes items are not query tables: held-out tables are required.
  CollectionSpec codes = MakeSpec("codes", Kind::kCodes, 4);
  ASSERT_TRUE(db->CreateCollection(codes).ok());
  testing::Batch cb = testing::RandomBatch(codes, 300, 0, 10);
  ASSERT_TRUE(db->Ingest("codes", cb.ingest(), nullptr).ok());
  expect_refused("codes", CalibrateOptions(), "held-out");
  // ... and with them it works.
  CalibrateOptions tables;
  testing::Batch qb = testing::RandomBatch(codes, 200, 0, 11);
  tables.queries.n = qb.n;
  tables.queries.logp = qb.logp.data();
  tables.query_labels = qb.labels.data();
  Status s = db->Calibrate("codes", tables, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// Codes query tables may hold log(0) = -inf (docs/formats.md): pairs then
// score -inf, which calibrate fits as the lowest finite score (they rank
// last), and the map gives such hits a probability, never NaN, no higher
// than any finite hit's.
TEST(Calibrate, CodesQueriesWithLogZeroCalibrate) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec codes = MakeSpec("codes", Kind::kCodes, 4);
  ASSERT_TRUE(db->CreateCollection(codes).ok());
  testing::Batch cb = testing::RandomBatch(codes, 300, 0, 10);
  ASSERT_TRUE(db->Ingest("codes", cb.ingest(), nullptr).ok());
  testing::Batch qb = testing::RandomBatch(codes, 200, 0, 11);
  // Every other query: probability 0 for all but its most likely symbol.
  const int64_t per_query = int64_t(codes.dim) * codes.code_k;
  int64_t infinite = 0;
  for (int64_t q = 0; q < qb.n; q += 2) {
    for (int64_t j = 0; j < codes.dim; ++j) {
      float* table = qb.logp.data() + q * per_query + j * codes.code_k;
      const float* best = std::max_element(table, table + codes.code_k);
      for (int s = 0; s < codes.code_k; ++s) {
        if (table + s == best) continue;
        table[s] = -std::numeric_limits<float>::infinity();
        ++infinite;
      }
    }
  }
  ASSERT_GT(infinite, 0);
  CalibrateOptions tables;
  tables.queries.n = qb.n;
  tables.queries.logp = qb.logp.data();
  tables.query_labels = qb.labels.data();
  CalibrationReport report;
  Status s = db->Calibrate("codes", tables, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  SearchOptions o;
  o.k = 300;
  o.exhaustive = true;
  std::vector<SearchResult> results;
  EmbeddingView two = tables.queries;
  two.n = 2;
  ASSERT_TRUE(db->Search("codes", two, o, &results).ok());
  int64_t minus_inf_hits = 0;
  for (const SearchResult& r : results) {
    float lowest_finite = 1;
    for (const SearchHit& h : r.hits) {
      ASSERT_FALSE(std::isnan(h.prob)) << h.id;
      if (std::isfinite(h.score)) lowest_finite = std::min(lowest_finite, h.prob);
    }
    for (const SearchHit& h : r.hits) {
      if (std::isfinite(h.score)) continue;
      ++minus_inf_hits;
      EXPECT_LE(h.prob, lowest_finite) << h.id;
    }
  }
  EXPECT_GT(minus_inf_hits, 0);
}

TEST(Calibrate, ImportedMapsAreCheckedAndUsed) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 400, 8, 12));
  // A map fitted outside the database, on synthetic pairs whose true
  // probability is the score itself.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<double> scores(5000);
  std::vector<uint8_t> same(5000);
  for (size_t i = 0; i < scores.size(); ++i) {
    scores[i] = uni(rng);
    same[i] = uni(rng) < scores[i] ? 1 : 0;
  }
  std::string bytes;
  CalibrationInfo info;
  Status s = FitCalibrationMap(ScoreType::kMc, scores.data(), same.data(), int64_t(scores.size()),
                               0, &bytes, &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NEAR(info.base_rate, 0.5, 0.03);
  ASSERT_TRUE(db->ImportCalibration("c", bytes, 0.1).ok());
  const CollectionStats st = StatsOf(db.get(), "c");
  ASSERT_EQ(st.calibrations.size(), 1u);
  EXPECT_DOUBLE_EQ(st.calibrations[0].base_rate, 0.1);
  // Damaged bytes and maps of scores the kind lacks are refused.
  std::string damaged = bytes;
  damaged[damaged.size() / 2] ^= 1;
  EXPECT_TRUE(db->ImportCalibration("c", damaged, 0).IsCorruption());
  ASSERT_TRUE(FitCalibrationMap(ScoreType::kLogprob, scores.data(), same.data(),
                                int64_t(scores.size()), 0, &bytes, nullptr)
                  .ok());
  EXPECT_TRUE(db->ImportCalibration("c", bytes, 0).IsInvalidArgument());
  EXPECT_EQ(StatsOf(db.get(), "c").calibrations.size(), 1u);
}

TEST(Calibrate, ADamagedStoredMapIsReportedAndNotUsed) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  const testing::Batch queries = ClusteredBatch(spec, 3, 8, 14);
  storage::CollectionMeta meta;
  {
    std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 400, 8, 13));
    ASSERT_TRUE(db->Calibrate("c", CalibrateOptions(), nullptr).ok());
  }
  {
    std::unique_ptr<storage::RecordStore> store;
    ASSERT_TRUE(
        storage::RecordStore::Open(storage::StoreOptions(), dir.path() + "/store", &store).ok());
    std::vector<storage::CollectionMeta> metas;
    ASSERT_TRUE(store->LoadCatalog(&metas).ok());
    ASSERT_EQ(metas.size(), 1u);
    std::vector<std::pair<uint8_t, std::string>> maps;
    ASSERT_TRUE(store->LoadCalibrations(metas[0], &maps).ok());
    ASSERT_EQ(maps.size(), 1u);
    std::string bytes = maps[0].second;
    bytes[bytes.size() - 9] ^= 0x20;
    ASSERT_TRUE(store->PutCalibration(metas[0], maps[0].first, bytes).ok());
  }
  std::unique_ptr<DB> db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_TRUE(st.calibrations.empty());
  EXPECT_NE(st.calibration_note.find("damaged"), std::string::npos) << st.calibration_note;
  std::vector<SearchResult> results;
  ASSERT_TRUE(db->Search("c", queries.view(), SearchOptions(), &results).ok());
  EXPECT_TRUE(std::isnan(results[0].hits[0].prob));
  // Refitting replaces it.
  ASSERT_TRUE(db->Calibrate("c", CalibrateOptions(), nullptr).ok());
  db.reset();
  db = OpenDb(dir.path());
  EXPECT_EQ(StatsOf(db.get(), "c").calibrations.size(), 1u);
}

// The stored map is the old one or the new one, whenever the process dies.
TEST(Calibrate, SurvivesSigkillDuringCalibrate) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  {
    std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 2000, 20, 15));
    CalibrateOptions first;
    first.max_pairs = 20000;
    ASSERT_TRUE(db->Calibrate("c", first, nullptr).ok());
  }
  const std::string cli = std::string(HEDGEDB_BIN_DIR) + "/hedgedb";
  if (::access(cli.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << cli;
  // A sanitizer makes the scoring ~35x slower: fewer pairs keep the run
  // (and the kills inside it) within the test's time.
  const std::string max_pairs = testing_util::kSanitized ? "200000" : "2000000";
  int replaced = 0;
  for (int round = 0; round < 5; ++round) {
    const std::string seed = std::to_string(round);
    std::vector<std::string> args = {cli, "calibrate",   "--db",    dir.path(),      "--collection",
                                     "c", "--max-pairs", max_pairs, "--sample-seed", seed};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(::posix_spawn(&pid, cli.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    int status = 0;
    if (round < 4) {
      // From early (opening) to late (fitting, storing) in the run.
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + 1200 * round));
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    } else {  // the last run completes
      ::waitpid(pid, &status, 0);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    std::unique_ptr<DB> db = OpenDb(dir.path());
    const CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_TRUE(st.calibration_note.empty()) << st.calibration_note;
    ASSERT_EQ(st.calibrations.size(), 1u);
    EXPECT_EQ(st.items, 2000);
    // The first map had at most 20000 pairs; a refit has 1999 per query.
    if (st.calibrations[0].pairs > 20000) ++replaced;
    if (round == 4) {
      EXPECT_GT(st.calibrations[0].pairs, 20000);
    }
  }
  std::printf("the map was replaced by %d of 5 runs (the last one completes)\n", replaced);
}

// The same pairs through a score matrix (no database) give the same fit.
TEST(Calibrate, ScoreMatrixEntryPointAgreesWithTheCollection) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  const testing::Batch items = ClusteredBatch(spec, 600, 10, 22);
  std::unique_ptr<DB> db = DbWith(dir, spec, items);
  CalibrationReport from_db;
  CalibrateOptions o;
  o.dry_run = true;
  ASSERT_TRUE(db->Calibrate("c", o, &from_db).ok());
  std::vector<float> scores, eta;
  ASSERT_TRUE(ScoreMatrix(spec, items.view(), items.view(), ScoreOptions(), &scores).ok());
  ASSERT_TRUE(ItemUncertainties(spec, items.view(), ScoreOptions(), &eta).ok());
  std::vector<int64_t> self(600);
  for (int64_t i = 0; i < 600; ++i) self[size_t(i)] = i;
  CalibrationReport from_matrix;
  std::string bytes;
  Status s =
      CalibrateScoreMatrix(ScoreType::kMc, scores.data(), 600, 600, items.labels.data(),
                           items.labels.data(), self.data(), eta.data(), 0, &bytes, &from_matrix);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(from_matrix.info.pairs, from_db.info.pairs);
  EXPECT_EQ(from_matrix.positives, from_db.positives);
  EXPECT_NEAR(from_matrix.before.ece, from_db.before.ece, 1e-6);
  EXPECT_DOUBLE_EQ(from_matrix.before.precision_at_1, from_db.before.precision_at_1);
  EXPECT_NEAR(from_matrix.after.ece, from_db.after.ece, 0.01);
  EXPECT_EQ(from_matrix.top_matches.size(), 600u);
  EXPECT_TRUE(std::isfinite(from_matrix.top_matches[0].query_uncertainty));
  // The map can be imported into the collection.
  ASSERT_TRUE(db->ImportCalibration("c", bytes, 0).ok());
  EXPECT_EQ(StatsOf(db.get(), "c").calibrations.size(), 1u);
  // The map on other queries: 300 fresh ones from the same clusters, then
  // the same queries shifted (their variances times 4: more uncertain than
  // anything the map saw). Precision@1 is recomputed here from the matrix.
  const testing::Batch fresh = ClusteredBatch(spec, 300, 10, 23);
  testing::Batch shifted = fresh;
  for (float& v : shifted.var) v *= 4;
  for (const testing::Batch* queries : std::vector<const testing::Batch*>{&fresh, &shifted}) {
    std::vector<float> q_scores, q_eta;
    ASSERT_TRUE(
        ScoreMatrix(spec, queries->view(), items.view(), ScoreOptions(), &q_scores).ok());
    ASSERT_TRUE(ItemUncertainties(spec, queries->view(), ScoreOptions(), &q_eta).ok());
    CalibrationQuality quality;
    s = MeasureCalibrationScoreMatrix(bytes, q_scores.data(), 300, 600, queries->labels.data(),
                                      items.labels.data(), nullptr, q_eta.data(), &quality);
    ASSERT_TRUE(s.ok()) << s.ToString();
    double right = 0;
    for (int64_t q = 0; q < 300; ++q) {
      const float* row = q_scores.data() + q * 600;
      const int64_t best = std::max_element(row, row + 600) - row;
      right += items.labels[size_t(best)] == queries->labels[size_t(q)] ? 1 : 0;
    }
    EXPECT_DOUBLE_EQ(quality.precision_at_1, right / 300);
    EXPECT_EQ(quality.eta_quartiles.size(), 4u);
    std::printf("%s queries: mean top-1 p %.3f, precision@1 %.3f, ECE@10 %.4f\n",
                queries == &fresh ? "fresh" : "shifted", quality.mean_top1_prob,
                quality.precision_at_1, quality.ece_top10);
    if (queries == &fresh) {
      EXPECT_NEAR(quality.mean_top1_prob, quality.precision_at_1, 0.08);
    }
  }
  // Bad input.
  CalibrationQuality quality;
  EXPECT_TRUE(MeasureCalibrationScoreMatrix("not a map", scores.data(), 600, 600,
                                            items.labels.data(), items.labels.data(), self.data(),
                                            nullptr, &quality)
                  .IsCorruption());
  EXPECT_TRUE(MeasureCalibrationScoreMatrix(bytes, scores.data(), 0, 600, items.labels.data(),
                                            items.labels.data(), self.data(), nullptr, &quality)
                  .IsInvalidArgument());
  scores[5] = std::nanf("");
  EXPECT_TRUE(CalibrateScoreMatrix(ScoreType::kMc, scores.data(), 600, 600, items.labels.data(),
                                   items.labels.data(), self.data(), nullptr, 0, nullptr,
                                   &from_matrix)
                  .IsInvalidArgument());
  EXPECT_TRUE(MeasureCalibrationScoreMatrix(bytes, scores.data(), 600, 600, items.labels.data(),
                                            items.labels.data(), self.data(), nullptr, &quality)
                  .IsInvalidArgument());
}

// Top-1 calibration of fresh labelled queries split at their median eta.
struct EtaHalf {
  double mean_prob = 0, precision = 0;
  int64_t queries = 0;
};

std::vector<EtaHalf> TopOneByEtaHalf(const std::vector<SearchResult>& results,
                                     const std::vector<int64_t>& labels) {
  std::vector<float> etas;
  for (const SearchResult& r : results) etas.push_back(r.query_uncertainty);
  std::vector<float> sorted = etas;
  std::sort(sorted.begin(), sorted.end());
  const float median = sorted[sorted.size() / 2];
  std::vector<EtaHalf> halves(2);
  for (size_t q = 0; q < results.size(); ++q) {
    EtaHalf& h = halves[etas[q] < median ? 0 : 1];
    const SearchHit& top = results[q].hits.at(0);
    h.mean_prob += top.prob;
    h.precision += top.label == labels[q] ? 1 : 0;
    ++h.queries;
  }
  for (EtaHalf& h : halves) {
    h.mean_prob /= double(h.queries);
    h.precision /= double(h.queries);
  }
  return halves;
}

// ECE (15 equal-mass bins) of the hits ranked at most max_rank.
double EceOfHits(const std::vector<SearchResult>& results, const std::vector<int64_t>& labels,
                 size_t max_rank) {
  std::vector<calibration::ScoredPair> pairs;
  for (size_t q = 0; q < results.size(); ++q) {
    for (size_t j = 0; j < std::min(max_rank, results[q].hits.size()); ++j) {
      const SearchHit& h = results[q].hits[j];
      pairs.push_back({double(h.prob), h.label == labels[q]});
    }
  }
  calibration::CalibrationMetrics m;
  EXPECT_TRUE(calibration::MeasureCalibration(pairs, &m).ok());
  return m.ece;
}

// Gaussians whose uncertain items are the noisy ones, in an IVF index: the
// map of the score alone promises uncertain queries too much and certain
// ones too little; the conditional map (rank, gap, query and item eta) is
// right in both halves, for the top-1 and the top-10, with one map.
TEST(Calibrate, ConditionalMapIsRightForUncertainQueriesAtEveryK) {
  if (testing_util::kSanitized) GTEST_SKIP() << "needs ~1M scored pairs";
  TempDir dir;
  const CollectionSpec spec = GaussianSpec("IVF16,Flat");
  std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 3000, 20, 31));
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);
  const testing::Batch queries = ClusteredBatch(spec, 2000, 20, 32);
  SearchOptions top10;
  top10.k = 10;

  struct Run {
    const char* name;
    bool unconditional;
  };
  double worst_gap[2] = {0, 0};
  for (const Run& run : {Run{"score alone", true}, Run{"conditional", false}}) {
    CalibrateOptions o;
    o.unconditional = run.unconditional;
    CalibrationReport report;
    Status s = db->Calibrate("c", o, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(report.info.conditional, !run.unconditional);
    // The report's own held-out view: ECE of the top-1 and top-10, and the
    // top-1 per quartile of query eta.
    EXPECT_TRUE(std::isfinite(report.after.ece_top1));
    EXPECT_TRUE(std::isfinite(report.after.ece_top10));
    ASSERT_EQ(report.after.eta_quartiles.size(), 4u);
    std::vector<SearchResult> results;
    ASSERT_TRUE(db->Search("c", queries.view(), top10, &results).ok());
    const std::vector<EtaHalf> halves = TopOneByEtaHalf(results, queries.labels);
    for (int h = 0; h < 2; ++h) {
      std::printf("%s, %s eta half: mean top-1 prob %.3f, precision@1 %.3f (%lld queries)\n",
                  run.name, h ? "high" : "low", halves[h].mean_prob, halves[h].precision,
                  (long long)halves[h].queries);
      worst_gap[run.unconditional ? 0 : 1] =
          std::max(worst_gap[run.unconditional ? 0 : 1],
                   std::fabs(halves[h].mean_prob - halves[h].precision));
    }
    std::printf(
        "%s: returned top-1 ECE %.4f, top-10 ECE %.4f; report (held out): all %.4f, "
        "top-1 %.4f, top-10 %.4f, worst eta-quartile gap %.3f; %s\n",
        run.name, EceOfHits(results, queries.labels, 1), EceOfHits(results, queries.labels, 10),
        report.after.ece, report.after.ece_top1, report.after.ece_top10, report.after.worst_eta_gap,
        report.info.reason.c_str());
    if (!run.unconditional) {
      EXPECT_EQ(report.info.method, "conditional");
      EXPECT_NE(report.info.conditioned_on.find("query eta"), std::string::npos);
      EXPECT_LE(EceOfHits(results, queries.labels, 10), 0.03);
      // One map for every k: over the exact ranking, the best hit of a
      // top-1 search says what the best hit of a top-10 search says (the
      // IVF's candidates for k = 1 and k = 10 differ, and so can the score
      // ranked second).
      SearchOptions exact1, exact10;
      exact1.k = 1;
      exact1.exhaustive = exact10.exhaustive = true;
      exact10.k = 10;
      std::vector<SearchResult> single, ten;
      ASSERT_TRUE(db->Search("c", queries.view(), exact1, &single).ok());
      ASSERT_TRUE(db->Search("c", queries.view(), exact10, &ten).ok());
      for (size_t q = 0; q < single.size(); ++q) {
        ASSERT_EQ(single[q].hits[0].id, ten[q].hits[0].id);
        ASSERT_EQ(single[q].hits[0].prob, ten[q].hits[0].prob) << "query " << q;
      }
    }
  }
  EXPECT_GT(worst_gap[0], 0.05) << "the score alone should miss the eta effect";
  EXPECT_LE(worst_gap[1], 0.05);

  // Threshold search with the conditional map: exactly the items of an
  // exhaustive ranking whose probability clears the threshold, with the
  // probabilities that ranking gives them.
  SearchOptions all;
  all.k = 3000;
  all.exhaustive = true;
  SearchOptions threshold;
  threshold.min_prob = 0.3;
  threshold.exhaustive = true;
  const testing::Batch few = ClusteredBatch(spec, 20, 20, 33);
  std::vector<SearchResult> ranked, over;
  ASSERT_TRUE(db->Search("c", few.view(), all, &ranked).ok());
  ASSERT_TRUE(db->Search("c", few.view(), threshold, &over).ok());
  for (size_t q = 0; q < ranked.size(); ++q) {
    std::map<int64_t, float> want;
    for (const SearchHit& h : ranked[q].hits) {
      if (h.prob >= 0.3f) want[h.id] = h.prob;
    }
    ASSERT_EQ(over[q].hits.size(), want.size()) << "query " << q;
    for (const SearchHit& h : over[q].hits) {
      ASSERT_TRUE(want.count(h.id)) << h.id;
      EXPECT_NEAR(h.prob, want[h.id], 1e-6);
    }
  }
}

// Codes: items are class prototypes (d symbols of k) with a few symbols
// changed; a query is its class's prototype read through noise of its own
// level f (each symbol replaced at random with probability f), and its table
// says so: the observed symbol 1 - f + f / k, every other f / k. The noisier
// the query, the flatter its table (its entropy, query_uncertainty) and the
// less often its best match is right, which the score alone does not say
// (a flat table compresses every score towards d ln(1/k), the best match's
// too).
testing::Batch NoisyCodes(const CollectionSpec& spec, int64_t n, int classes, bool tables,
                          uint64_t seed) {
  std::mt19937_64 rng(seed), prototype_rng(77);
  const int d = spec.dim, k = spec.code_k;
  std::vector<int32_t> prototypes(size_t(classes) * d);
  for (int32_t& c : prototypes) c = int32_t(prototype_rng() % uint64_t(k));
  std::uniform_real_distribution<double> uni(0, 1);
  testing::Batch b;
  b.n = n;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = int64_t(rng() % uint64_t(classes));
    b.ids.push_back(i);
    b.labels.push_back(label);
    const double f = tables ? 0.75 * uni(rng) : 0.1;
    for (int j = 0; j < d; ++j) {
      int32_t symbol = prototypes[size_t(label) * d + j];
      if (uni(rng) < f) symbol = int32_t(rng() % uint64_t(k));
      if (!tables) {
        b.codes.push_back(symbol);
        continue;
      }
      for (int s = 0; s < k; ++s) {
        b.logp.push_back(float(std::log(s == symbol ? 1 - f + f / k : f / k)));
      }
    }
  }
  return b;
}

// A codes collection's conditional map reads the entropy of the query's
// table as the query's eta: calibrated on held-out tables, fresh queries'
// best matches say in each half of that entropy how often they are right,
// where the map of the score alone does not.
TEST(Calibrate, CodesMapsReadTheEntropyOfTheQueryTable) {
  if (testing_util::kSanitized) GTEST_SKIP() << "needs ~1M scored pairs";
  TempDir dir;
  CollectionSpec spec = MakeSpec("codes", Kind::kCodes, 8);
  spec.code_k = 4;
  std::unique_ptr<DB> db = DbWith(dir, spec, NoisyCodes(spec, 1000, 40, false, 41));
  const testing::Batch held_out = NoisyCodes(spec, 2000, 40, true, 42);
  const testing::Batch fresh = NoisyCodes(spec, 2000, 40, true, 43);
  // The entropy, checked by hand on one table (in units of ln k).
  {
    SearchOptions one;
    one.k = 1;
    std::vector<SearchResult> r;
    testing::Batch first = fresh;
    first.n = 1;
    ASSERT_TRUE(db->Search("codes", first.view(), one, &r).ok());
    double h = 0;
    for (int j = 0; j < spec.dim; ++j) {
      for (int s = 0; s < spec.code_k; ++s) {
        const double p = std::exp(double(fresh.logp[size_t(j * spec.code_k + s)]));
        h -= p * std::log(p);
      }
    }
    EXPECT_NEAR(r[0].query_uncertainty, h / (spec.dim * std::log(double(spec.code_k))), 1e-5);
    EXPECT_TRUE(std::isnan(r[0].hits[0].uncertainty)) << "stored codes have no eta";
  }
  SearchOptions top10;
  top10.k = 10;
  double worst_gap[2] = {0, 0};
  for (const bool unconditional : {true, false}) {
    CalibrateOptions o;
    o.queries = held_out.view();
    o.query_labels = held_out.labels.data();
    o.unconditional = unconditional;
    CalibrationReport report;
    Status s = db->Calibrate("codes", o, &report);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(report.after.eta_quartiles.size(), 4u) << "codes queries have an eta";
    std::printf("%s\n", report.info.reason.c_str());
    if (!unconditional) {
      EXPECT_EQ(report.info.method, "conditional") << report.info.reason;
      EXPECT_NE(report.info.conditioned_on.find("query eta"), std::string::npos);
    }
    std::vector<SearchResult> results;
    ASSERT_TRUE(db->Search("codes", fresh.view(), top10, &results).ok());
    const std::vector<EtaHalf> halves = TopOneByEtaHalf(results, fresh.labels);
    for (int h = 0; h < 2; ++h) {
      std::printf("codes, %s, %s entropy half: mean top-1 prob %.3f, precision@1 %.3f\n",
                  unconditional ? "score alone" : "conditional", h ? "high" : "low",
                  halves[h].mean_prob, halves[h].precision);
      double& worst = worst_gap[unconditional ? 0 : 1];
      worst = std::max(worst, std::fabs(halves[h].mean_prob - halves[h].precision));
    }
  }
  EXPECT_GT(worst_gap[0], 0.05) << "the score alone should miss the entropy effect";
  EXPECT_LE(worst_gap[1], 0.05);

  // Match sets by quartile of the entropy (Mondrian) work for codes too.
  CalibrateOptions conformal;
  conformal.queries = held_out.view();
  conformal.query_labels = held_out.labels.data();
  conformal.conformal_fraction = 0.3;
  CalibrationReport report;
  ASSERT_TRUE(db->Calibrate("codes", conformal, &report).ok());
  SearchOptions sets;
  sets.coverage = 0.9;
  sets.coverage_by_eta = true;
  sets.max_results = 1000;
  std::vector<SearchResult> results;
  Status s = db->Search("codes", fresh.view(), sets, &results);
  ASSERT_TRUE(s.ok()) << s.ToString();
  int64_t covered = 0;
  for (size_t q = 0; q < results.size(); ++q) {
    for (const SearchHit& h : results[q].hits) {
      if (h.label == fresh.labels[q]) {
        ++covered;
        break;
      }
    }
  }
  // 600 conformal queries, 150 per quartile: within the noise of that.
  const double coverage = double(covered) / double(results.size());
  std::printf("codes, sets by entropy quartile at 0.9: coverage %.3f\n", coverage);
  EXPECT_GE(coverage, 0.86);
  EXPECT_LE(coverage, 0.96);
}

// Conformal match sets: calibrated with 30% of the queries kept out of the
// fit, a --coverage 0.9 search of fresh queries holds a same-label item in
// 87-95% of them (the finite-sample guarantee is >= 0.9 on average over
// calibration draws; one draw of ~300 conformal queries wobbles by ~0.02).
TEST(Calibrate, ConformalSetsCoverFreshQueries) {
  if (testing_util::kSanitized) GTEST_SKIP() << "needs ~3M scored pairs";
  TempDir dir;
  const CollectionSpec spec = GaussianSpec("IVF16,Flat");
  std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 3000, 20, 51));
  ASSERT_TRUE(db->Flush().ok());
  const testing::Batch queries = ClusteredBatch(spec, 2000, 20, 52);
  SearchOptions set90;
  set90.coverage = 0.9;
  // No calibration, then one without conformal scores: refused, saying why.
  std::vector<SearchResult> results;
  Status s = db->Search("c", queries.view(), set90, &results);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("coverage needs a calibration"), std::string::npos) << s.ToString();
  CalibrateOptions plain;
  plain.max_pairs = 20000;
  ASSERT_TRUE(db->Calibrate("c", plain, nullptr).ok());
  s = db->Search("c", queries.view(), set90, &results);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("conformal_fraction"), std::string::npos) << s.ToString();

  CalibrateOptions o;
  o.max_pairs = 3000 * 999;
  o.conformal_fraction = 0.3;
  CalibrationReport report;
  s = db->Calibrate("c", o, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // 999 queries fit in max_pairs (2,999 pairs each); 30% of them, rounded down.
  EXPECT_EQ(report.info.conformal_queries, 299);
  EXPECT_EQ(report.queries, 700);
  EXPECT_EQ(StatsOf(db.get(), "c").calibrations[0].conformal_queries, 299);
  ASSERT_TRUE(db->Search("c", queries.view(), set90, &results).ok());
  std::vector<float> etas;
  for (const SearchResult& r : results) etas.push_back(r.query_uncertainty);
  std::vector<float> sorted = etas;
  std::sort(sorted.begin(), sorted.end());
  const float median = sorted[sorted.size() / 2];
  int covered = 0, half_covered[2] = {0, 0}, half_n[2] = {0, 0};
  int64_t size[2] = {0, 0};
  for (size_t q = 0; q < results.size(); ++q) {
    bool hit = false;
    for (const SearchHit& h : results[q].hits) hit = hit || h.label == queries.labels[q];
    EXPECT_FALSE(results[q].truncated);
    const int half = etas[q] < median ? 0 : 1;
    covered += hit;
    half_covered[half] += hit;
    ++half_n[half];
    size[half] += int64_t(results[q].hits.size());
  }
  const double coverage = double(covered) / double(results.size());
  std::printf("coverage 0.9: measured %.3f; low eta half %.3f (mean set size %.1f), high eta half "
              "%.3f (%.1f)\n",
              coverage, double(half_covered[0]) / half_n[0], double(size[0]) / half_n[0],
              double(half_covered[1]) / half_n[1], double(size[1]) / half_n[1]);
  EXPECT_GE(coverage, 0.87);
  EXPECT_LE(coverage, 0.95);
  // By quartile of eta (Mondrian): ~75 conformal queries per quartile, and
  // coverage within each half of the fresh queries.
  SearchOptions by_eta = set90;
  by_eta.coverage_by_eta = true;
  ASSERT_TRUE(db->Search("c", queries.view(), by_eta, &results).ok());
  int eta_covered[2] = {0, 0};
  int64_t eta_size[2] = {0, 0};
  for (size_t q = 0; q < results.size(); ++q) {
    bool hit = false;
    for (const SearchHit& h : results[q].hits) hit = hit || h.label == queries.labels[q];
    const int half = etas[q] < median ? 0 : 1;
    eta_covered[half] += hit;
    eta_size[half] += int64_t(results[q].hits.size());
  }
  std::printf("coverage 0.9 by eta: low eta half %.3f (mean set size %.1f), high eta half %.3f "
              "(%.1f)\n",
              double(eta_covered[0]) / half_n[0], double(eta_size[0]) / half_n[0],
              double(eta_covered[1]) / half_n[1], double(eta_size[1]) / half_n[1]);
  for (int h = 0; h < 2; ++h) {
    EXPECT_GE(double(eta_covered[h]) / half_n[h], 0.85) << "half " << h;
    // About 75 conformal queries a quartile: each threshold's coverage
    // varies by about 0.035 from one calibration to the next.
    EXPECT_LE(double(eta_covered[h]) / half_n[h], 0.975) << "half " << h;
  }
  // Risk-controlled threshold: the realised false-match rate of the fresh
  // queries (non-matching pairs returned / non-matching pairs) is at most
  // the target; the held-out non-matching pairs bound it.
  EXPECT_GT(StatsOf(db.get(), "c").calibrations[0].held_out_non_matches, 299 * 2000);
  std::vector<int64_t> per_label(64, 0);
  const testing::Batch gallery = ClusteredBatch(spec, 3000, 20, 51);
  for (int64_t label : gallery.labels) ++per_label[size_t(label)];
  for (double target : {0.01, 0.001}) {
    SearchOptions risk;
    risk.max_false_match_rate = target;
    risk.max_results = 3000;
    ASSERT_TRUE(db->Search("c", queries.view(), risk, &results).ok());
    int64_t false_matches = 0, non_matching = 0, returned = 0;
    for (size_t q = 0; q < results.size(); ++q) {
      non_matching += 3000 - per_label[size_t(queries.labels[q])];
      for (const SearchHit& h : results[q].hits) {
        false_matches += h.label != queries.labels[q] ? 1 : 0;
        ++returned;
      }
    }
    const double rate = double(false_matches) / double(non_matching);
    std::printf("max false-match rate %.3f: realised %.5f (%lld results)\n", target, rate,
                static_cast<long long>(returned));
    EXPECT_LE(rate, target);
    EXPECT_GT(rate, target / 10);  // a threshold, not everything refused
  }
  // Bad input.
  SearchOptions bad = set90;
  bad.coverage = 1.5;
  EXPECT_TRUE(db->Search("c", queries.view(), bad, &results).IsInvalidArgument());
  bad.coverage = 0.9;
  bad.min_prob = 0.5;
  s = db->Search("c", queries.view(), bad, &results);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("exclude"), std::string::npos) << s.ToString();
  bad.min_prob = 0;
  bad.coverage = 0.999;  // needs 999 conformal queries
  s = db->Search("c", queries.view(), bad, &results);
  EXPECT_NE(s.message().find("at least 999 conformal queries"), std::string::npos)
      << s.ToString();
  bad.coverage = 0;
  bad.coverage_by_eta = true;
  EXPECT_TRUE(db->Search("c", queries.view(), bad, &results).IsInvalidArgument());
  bad.coverage_by_eta = false;
  bad.max_false_match_rate = 1e-6;  // needs ln(0.05) / ln(1 - 1e-6) ~ 3.0M pairs
  s = db->Search("c", queries.view(), bad, &results);
  EXPECT_NE(s.message().find("held-out non-matching pairs, the calibration has"),
            std::string::npos)
      << s.ToString();
  for (double rate : {0.0 - 0.5, 1.0, 2.0}) {
    bad.max_false_match_rate = rate;
    s = db->Search("c", queries.view(), bad, &results);
    EXPECT_NE(s.message().find("false-match rate must be in (0, 1)"), std::string::npos)
        << s.ToString();
  }
  bad.max_false_match_rate = 0.01;
  bad.confidence = 1.0;
  s = db->Search("c", queries.view(), bad, &results);
  EXPECT_NE(s.message().find("confidence must be in (0, 1)"), std::string::npos) << s.ToString();
  bad.confidence = 0.95;
  bad.min_prob = 0.5;
  s = db->Search("c", queries.view(), bad, &results);
  EXPECT_NE(s.message().find("excludes min-prob"), std::string::npos) << s.ToString();
  bad.min_prob = 0;
  o.conformal_fraction = 1.0;
  EXPECT_TRUE(db->Calibrate("c", o, nullptr).IsInvalidArgument());
}

// A map stored by version 1 of the format (before conditional maps) still
// loads, says it is unconditional, and gives the probabilities it did.
TEST(Calibrate, VersionOneMapStillLoadsAndWorks) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  const testing::Batch queries = ClusteredBatch(spec, 5, 8, 41);
  {
    std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 400, 8, 40));
    Status s =
        db->ImportCalibration("c", calibration::testing::VersionOnePlattMap(1.3, -3.5, 0.1), 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::unique_ptr<DB> db = OpenDb(dir.path());
  const CollectionStats st = StatsOf(db.get(), "c");
  ASSERT_EQ(st.calibrations.size(), 1u);
  EXPECT_EQ(st.calibrations[0].method, "platt");
  EXPECT_FALSE(st.calibrations[0].conditional);
  EXPECT_TRUE(st.calibration_note.empty()) << st.calibration_note;
  std::vector<SearchResult> results;
  ASSERT_TRUE(db->Search("c", queries.view(), SearchOptions(), &results).ok());
  for (const SearchResult& r : results) {
    for (const SearchHit& h : r.hits) {
      const double s = std::min(std::max(double(h.score), 1e-7), 1 - 1e-7);
      const double z = 1.3 * std::log(s / (1 - s)) - 3.5;
      EXPECT_NEAR(h.prob, 1 / (1 + std::exp(-z)), 1e-6);
    }
  }
}

// The standard error of an mc score is honest: over 1,000 seeds its root mean
// square matches the spread of the scores, and score +- 1.96 standard errors
// covers the truth (K = 1024, averaged over 8 seeds) at close to 95%.
TEST(McStandardError, MatchesTheSpreadOverSeedsAndCoversTheTruth) {
  TempDir dir;
  CollectionSpec spec = GaussianSpec();
  const testing::Batch items = ClusteredBatch(spec, 6, 2, 18);
  std::unique_ptr<DB> db = DbWith(dir, spec, items);
  const testing::Batch query = ClusteredBatch(spec, 1, 2, 19);
  SearchOptions o;
  o.k = 6;
  o.exhaustive = true;
  o.has_seed = true;
  std::vector<SearchResult> results;
  std::map<int64_t, double> truth;
  for (uint64_t seed = 1001; seed <= 1008; ++seed) {
    o.samples = 1024;
    o.seed = seed;
    ASSERT_TRUE(db->Search("c", query.view(), o, &results).ok());
    for (const SearchHit& h : results[0].hits) {
      truth[h.id] += h.score / 8.0;
      EXPECT_LT(h.std_error, 0.01);
      EXPECT_EQ(h.samples, 1024);
    }
  }
  for (int K : {8, 32}) {
    int covered = 0, total = 0;
    std::map<int64_t, std::vector<double>> scores, errors;
    for (uint64_t seed = 1; seed <= 1000; ++seed) {
      o.samples = K;
      o.seed = seed;
      ASSERT_TRUE(db->Search("c", query.view(), o, &results).ok());
      for (const SearchHit& h : results[0].hits) {
        ASSERT_TRUE(std::isfinite(h.std_error));
        covered += std::fabs(h.score - truth[h.id]) <= 1.96 * h.std_error ? 1 : 0;
        ++total;
        scores[h.id].push_back(h.score);
        errors[h.id].push_back(h.std_error);
      }
    }
    for (const auto& kv : scores) {
      double mean = 0, var = 0, mean_square_error = 0;
      for (double x : kv.second) mean += x / kv.second.size();
      for (double x : kv.second) var += (x - mean) * (x - mean) / (kv.second.size() - 1);
      for (double e : errors[kv.first]) mean_square_error += e * e / kv.second.size();
      const double ratio = std::sqrt(mean_square_error / var);
      EXPECT_GT(ratio, 0.85) << "K = " << K << " item " << kv.first;
      EXPECT_LT(ratio, 1.25) << "K = " << K << " item " << kv.first;
    }
    const double rate = double(covered) / total;
    std::printf("K = %d: score +- 1.96 se covers the truth in %.3f of %d\n", K, rate, total);
    EXPECT_GT(rate, K == 8 ? 0.82 : 0.88) << "K = " << K;
    EXPECT_LT(rate, 0.99) << "K = " << K;
  }
  // Without uncertainties, and for scores that are not Monte Carlo: none.
  o.with_uncertainty = false;
  ASSERT_TRUE(db->Search("c", query.view(), o, &results).ok());
  EXPECT_TRUE(std::isnan(results[0].hits[0].std_error));
  o.with_uncertainty = true;
  o.score = ScoreType::kCsd;
  ASSERT_TRUE(db->Search("c", query.view(), o, &results).ok());
  EXPECT_TRUE(std::isnan(results[0].hits[0].std_error));
  EXPECT_EQ(results[0].hits[0].samples, 0);
}

// Adaptive samples: the top k of fixed K = 64 at a fraction of its cost.
TEST(AdaptiveSamples, TopKIsStableAgainstManySamplesAtLowerCost) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec();
  std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 2000, 20, 20));
  const testing::Batch queries = ClusteredBatch(spec, 100, 20, 21);
  const int k = 10;
  auto search = [&](int samples, bool adaptive, std::vector<SearchResult>* out) {
    SearchOptions o;
    o.k = k;
    o.exhaustive = true;
    o.with_uncertainty = false;
    o.samples = samples;
    o.adaptive_samples = adaptive;
    o.max_samples = 64;
    Status s = db->Search("c", queries.view(), o, out);
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  std::vector<SearchResult> reference, fixed8, adaptive;
  search(64, false, &reference);
  search(8, false, &fixed8);
  search(8, true, &adaptive);
  auto overlap = [&](const std::vector<SearchResult>& r) {
    double same = 0;
    for (size_t q = 0; q < r.size(); ++q) {
      std::set<int64_t> want;
      for (const SearchHit& h : reference[q].hits) want.insert(h.id);
      for (const SearchHit& h : r[q].hits) same += want.count(h.id);
    }
    return same / double(r.size() * k);
  };
  // Cost in pair terms: K^2 per scored item.
  double cost_adaptive = 0, cost_fixed64 = 64.0 * 64 * 2000 * 100;
  int max_used = 0;
  for (const SearchResult& r : adaptive) {
    cost_adaptive += 64.0 * 2000;  // the first pass at K = 8
    for (const SearchHit& h : r.hits) max_used = std::max(max_used, h.samples);
    cost_adaptive += double(r.scored - 2000) * 64 * 64;  // rescoring, at most K = 64 each
  }
  const double stable_fixed8 = overlap(fixed8), stable_adaptive = overlap(adaptive);
  std::printf(
      "top-%d overlap with K = 64: fixed K = 8 %.3f, adaptive %.3f (max K %d); cost "
      "(pair terms, upper bound) %.3f of fixed K = 64\n",
      k, stable_fixed8, stable_adaptive, max_used, cost_adaptive / cost_fixed64);
  EXPECT_GT(stable_adaptive, stable_fixed8);
  EXPECT_GT(stable_adaptive, 0.9);
  EXPECT_LT(cost_adaptive, 0.5 * cost_fixed64);
  EXPECT_GT(max_used, 8);
  for (const SearchResult& r : adaptive) {
    for (const SearchHit& h : r.hits) {
      EXPECT_TRUE(h.samples == 8 || h.samples == 16 || h.samples == 32 || h.samples == 64);
      EXPECT_TRUE(std::isfinite(h.std_error));
    }
  }
}

// Threshold search finds what an exhaustive scan finds.
class ThresholdSearch : public ::testing::TestWithParam<std::string> {};

TEST_P(ThresholdSearch, MatchesAnExhaustiveScan) {
  TempDir dir;
  const CollectionSpec spec = GaussianSpec(GetParam());
  // One thread: an HNSW graph built by several threads differs run to run,
  // and now and then leaves a node few searches reach. With one thread the
  // graph, and so the count of found items below, is the same every run.
  Options one_thread;
  one_thread.threads = 1;
  std::unique_ptr<DB> db = DbWith(dir, spec, ClusteredBatch(spec, 3000, 30, 16), one_thread);
  ASSERT_TRUE(db->Flush().ok());  // trains the index
  const CollectionStats st = StatsOf(db.get(), "c");
  ASSERT_TRUE(st.index_trained);
  std::printf("%s: fitted nprobe %d, efSearch %d, %lld candidates\n", GetParam().c_str(),
              st.index_nprobe, st.index_ef_search, (long long)st.index_candidates);
  ASSERT_TRUE(db->Calibrate("c", CalibrateOptions(), nullptr).ok());
  const testing::Batch queries = ClusteredBatch(spec, 40, 30, 17);
  for (double p : {0.9, 0.5, 0.2, 0.05}) {
    SearchOptions o;
    o.min_prob = p;
    o.with_uncertainty = false;
    std::vector<SearchResult> fast, exact;
    Status s = db->Search("c", queries.view(), o, &fast);
    ASSERT_TRUE(s.ok()) << s.ToString();
    o.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
    int64_t qualifying = 0, found = 0, scored = 0;
    for (size_t q = 0; q < exact.size(); ++q) {
      std::set<int64_t> want;
      for (const SearchHit& h : exact[q].hits) {
        EXPECT_GE(h.prob, p);
        want.insert(h.id);
      }
      for (size_t j = 0; j < fast[q].hits.size(); ++j) {
        const SearchHit& h = fast[q].hits[j];
        EXPECT_GE(h.prob, p);
        if (j > 0) {
          EXPECT_LE(h.score, fast[q].hits[j - 1].score);
        }
        found += want.count(h.id);
      }
      qualifying += int64_t(want.size());
      scored += fast[q].scored;
    }
    std::printf("%s p >= %.2f: %lld qualifying, %lld found, %.0f scored per query\n",
                GetParam().c_str(), p, (long long)qualifying, (long long)found,
                double(scored) / double(exact.size()));
    EXPECT_GE(double(found), 0.99 * double(qualifying)) << "p = " << p;
  }
  // With a filter (most items pass, so stage 1 filters inside its scan):
  // the same items as an exhaustive filtered scan, all passing.
  {
    SearchOptions o;
    o.min_prob = 0.2;
    o.with_uncertainty = false;
    o.filter.label_rule = SearchFilter::LabelRule::kNotIn;
    o.filter.labels = {0, 1};
    std::vector<SearchResult> fast, exact;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &fast).ok());
    o.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
    int64_t qualifying = 0, found = 0;
    for (size_t q = 0; q < exact.size(); ++q) {
      EXPECT_GT(fast[q].passing, 2048);
      std::set<int64_t> want;
      for (const SearchHit& h : exact[q].hits) want.insert(h.id);
      for (const SearchHit& h : fast[q].hits) {
        EXPECT_TRUE(h.label != 0 && h.label != 1) << h.id;
        found += want.count(h.id);
      }
      qualifying += int64_t(want.size());
    }
    EXPECT_GT(qualifying, 0);
    EXPECT_GE(double(found), 0.99 * double(qualifying));
  }
  // The cap, and bad thresholds.
  SearchOptions capped;
  capped.min_prob = 0.01;
  capped.max_results = 5;
  std::vector<SearchResult> results;
  ASSERT_TRUE(db->Search("c", queries.view(), capped, &results).ok());
  bool any_truncated = false;
  for (const SearchResult& r : results) {
    EXPECT_LE(r.hits.size(), 5u);
    any_truncated |= r.truncated;
  }
  EXPECT_TRUE(any_truncated);
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    capped.min_prob = bad;
    EXPECT_TRUE(db->Search("c", queries.view(), capped, &results).IsInvalidArgument()) << bad;
  }
}

INSTANTIATE_TEST_SUITE_P(Indexes, ThresholdSearch,
                         ::testing::Values("Flat", "IVF32,Flat", "HNSW16", "IVF16,SQ8"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace hedgedb

namespace hedgedb {
namespace {

// The balanced log loss of query/match_fit.h, written out again here from
// its definition, as the independent check of the fit.
double BalancedLoss(const query::MatchPairs& p, double a, double b) {
  double pos = 0, neg = 0;
  for (int64_t i = 0; i < p.pairs(); ++i) {
    double q = 0;
    for (int k = 0; k < p.samples; ++k) {
      q += 1 / (1 + std::exp(a * p.distances[size_t(i * p.samples + k)] - b));
    }
    q /= p.samples;
    if (p.same_label[size_t(i)])
      pos -= std::log(q);
    else
      neg -= std::log(1 - q);
  }
  return 0.5 * pos / double(p.positives) + 0.5 * neg / double(p.pairs() - p.positives);
}

TEST(MatchFit, RecoversTheParametersThatDrewTheLabels) {
  // One draw a pair: HIB's match probability is a logistic regression on
  // the distance, whose balanced fit has the true slope and the intercept
  // shifted by log(negatives / positives) (the weights' prior shift).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double a = 2.5, b = 4.0;
  query::MatchPairs pairs;
  pairs.samples = 1;
  for (int i = 0; i < 200000; ++i) {
    const double d = 4.0 * uni(rng);
    const bool y = uni(rng) < 1 / (1 + std::exp(a * d - b));
    pairs.distances.push_back(float(d));
    pairs.same_label.push_back(y);
    pairs.positives += y;
  }
  query::MatchFit fit;
  ASSERT_TRUE(query::FitMatchParameters(pairs, &fit).ok());
  const double shift = std::log(double(pairs.pairs() - pairs.positives) / pairs.positives);
  EXPECT_NEAR(fit.match_a, a, 0.05 * a);
  EXPECT_NEAR(fit.match_b, b + shift, 0.1);
  EXPECT_NEAR(fit.log_loss, BalancedLoss(pairs, fit.match_a, fit.match_b), 1e-9);
}

TEST(MatchFit, IsTheMinimumOfTheMonteCarloLikelihood) {
  // Drawn from a collection's rows, 16 draws a pair: no step in a or b
  // lowers the loss (checked by the loss written out above).
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "Flat");
  const testing::Batch items = ClusteredBatch(spec, 400, 10, 3);
  std::vector<const float*> rows;
  std::vector<std::vector<float>> packed(size_t(items.n));
  for (int64_t i = 0; i < items.n; ++i) {
    packed[size_t(i)].assign(items.mean.begin() + i * 8, items.mean.begin() + (i + 1) * 8);
    packed[size_t(i)].insert(packed[size_t(i)].end(), items.var.begin() + i * 8,
                             items.var.begin() + (i + 1) * 8);
    rows.push_back(packed[size_t(i)].data());
  }
  query::MatchPairs pairs;
  ASSERT_TRUE(query::DrawMatchPairs(spec, rows, items.labels, 1, &pairs).ok());
  EXPECT_EQ(pairs.samples, 16);
  EXPECT_EQ(pairs.pairs(), 2 * pairs.positives);
  query::MatchFit fit;
  ASSERT_TRUE(query::FitMatchParameters(pairs, &fit).ok());
  const double at = BalancedLoss(pairs, fit.match_a, fit.match_b);
  for (double da : {-0.01, 0.01}) {
    EXPECT_GT(BalancedLoss(pairs, fit.match_a * (1 + da), fit.match_b), at);
  }
  for (double db : {-0.01, 0.01}) {
    EXPECT_GT(BalancedLoss(pairs, fit.match_a, fit.match_b + db), at);
  }
  EXPECT_GT(fit.match_b, 0);

  // One label: nothing to fit, and the error says what is needed.
  std::vector<int64_t> one(items.labels.size(), 0);
  const Status s = query::DrawMatchPairs(spec, rows, one, 1, &pairs);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("two labels"), std::string::npos) << s.ToString();
}

TEST(Calibrate, FitsMatchParametersThatCannotExpressAMatch) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "Flat");  // a = 1, b = 0
  ASSERT_FALSE(MatchParametersNote(spec).empty());
  const testing::Batch items = ClusteredBatch(spec, 600, 10, 1);
  std::unique_ptr<DB> db = DbWith(dir, spec, items);
  std::unique_ptr<DB> reader;
  {
    Options ro;
    ro.read_only = true;
    ASSERT_TRUE(DB::Open(ro, dir.path(), &reader).ok());
  }
  const auto self_search = [&](DB* d, std::vector<SearchResult>* r) {
    testing::Batch one = items;
    one.n = 1;
    ASSERT_TRUE(d->Search("c", one.view(), SearchOptions(), r).ok());
  };
  std::vector<SearchResult> before;
  self_search(db.get(), &before);
  EXPECT_LT(before[0].hits[0].score, 0.5f);  // the item itself
  EXPECT_GE(before[0].query_uncertainty, 0.5f);

  // An mls map first: fitting the parameters drops it (its conditional
  // part reads eta, which they change).
  CalibrateOptions mls;
  mls.max_pairs = 30000;
  mls.score = ScoreType::kMls;
  mls.match_parameters = CalibrateOptions::MatchParameters::kKeep;
  ASSERT_TRUE(db->Calibrate("c", mls, nullptr).ok());
  CollectionSpec kept;
  ASSERT_TRUE(db->DescribeCollection("c", &kept).ok());
  EXPECT_EQ(kept.match_b, 0.0f);

  // A dry run fits and reports, and changes nothing.
  CalibrationReport dry;
  CalibrateOptions dry_options;
  dry_options.dry_run = true;
  dry_options.max_pairs = 30000;
  ASSERT_TRUE(db->Calibrate("c", dry_options, &dry).ok());
  EXPECT_TRUE(dry.match_parameters_fitted);
  EXPECT_FALSE(dry.stored);
  ASSERT_TRUE(db->DescribeCollection("c", &kept).ok());
  EXPECT_EQ(kept.match_b, 0.0f);

  CalibrationReport report;
  CalibrateOptions options;
  options.max_pairs = 30000;
  ASSERT_TRUE(db->Calibrate("c", options, &report).ok());
  EXPECT_TRUE(report.match_parameters_fitted);
  EXPECT_EQ(report.match_a_before, 1.0);
  EXPECT_EQ(report.match_b_before, 0.0);
  EXPECT_GT(report.match_b, 0.0);
  EXPECT_EQ(report.match_a, dry.match_a);  // seeded: the same fit
  EXPECT_EQ(report.match_b, dry.match_b);
  CollectionSpec fitted;
  ASSERT_TRUE(db->DescribeCollection("c", &fitted).ok());
  EXPECT_EQ(fitted.match_a, float(report.match_a));
  EXPECT_EQ(fitted.match_b, float(report.match_b));
  EXPECT_TRUE(MatchParametersNote(fitted).empty());
  CollectionStats st = StatsOf(db.get(), "c");
  ASSERT_EQ(st.calibrations.size(), 1u);
  EXPECT_EQ(st.calibrations[0].score, ScoreType::kMc);

  // Searches read them: the item itself is now a match, and its eta small.
  std::vector<SearchResult> after;
  self_search(db.get(), &after);
  EXPECT_EQ(after[0].hits[0].id, before[0].hits[0].id);
  EXPECT_GT(after[0].hits[0].score, 0.5f);
  EXPECT_LT(after[0].query_uncertainty, 0.5f);
  EXPECT_TRUE(std::isfinite(after[0].hits[0].prob));

  // A reader sees them at its next catch-up, with the new map.
  ASSERT_TRUE(reader->CatchUp().ok());
  CollectionSpec seen;
  ASSERT_TRUE(reader->DescribeCollection("c", &seen).ok());
  EXPECT_EQ(seen.match_b, fitted.match_b);
  std::vector<SearchResult> read;
  self_search(reader.get(), &read);
  EXPECT_EQ(read[0].hits[0].score, after[0].hits[0].score);
  EXPECT_EQ(read[0].hits[0].prob, after[0].hits[0].prob);
  reader.reset();

  // Auto leaves parameters that can express a match alone.
  CalibrationReport again;
  ASSERT_TRUE(db->Calibrate("c", options, &again).ok());
  EXPECT_FALSE(again.match_parameters_fitted);
  EXPECT_EQ(again.match_b, report.match_b);

  // They survive reopen, and the index and arena files stay the
  // collection's own: bound to the parameters it was created with, so verify
  // finds nothing and the reopen maps the snapshot instead of rebuilding.
  db.reset();
  VerifyReport verified;
  ASSERT_TRUE(VerifyDB(dir.path(), "c", &verified).ok());
  EXPECT_TRUE(verified.ok()) << verified.problems[0].kind << ": " << verified.problems[0].detail;
  db = OpenDb(dir.path());
  ASSERT_TRUE(db->DescribeCollection("c", &seen).ok());
  EXPECT_EQ(seen.match_a, fitted.match_a);
  EXPECT_EQ(seen.match_b, fitted.match_b);
  st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.arena_source, "snapshot") << st.arena_note;
  EXPECT_TRUE(st.index_note.empty()) << st.index_note;

  // Auto keeps what it cannot fit and says why: a gallery of one item per
  // label, calibrated with labelled held-out queries (the enrolment case).
  {
    CollectionSpec single = MakeSpec("single", Kind::kGaussian, 8, "Flat");
    ASSERT_TRUE(db->CreateCollection(single).ok());
    testing::Batch gallery = ClusteredBatch(single, 40, 40, 5);
    for (int64_t i = 0; i < gallery.n; ++i) gallery.labels[size_t(i)] = i;
    ASSERT_TRUE(db->Ingest("single", gallery.ingest(), nullptr).ok());
    testing::Batch held = ClusteredBatch(single, 200, 40, 6);
    for (int64_t i = 0; i < held.n; ++i) held.labels[size_t(i)] = i % 40;
    CalibrateOptions with_queries;
    with_queries.queries = held.view();
    with_queries.query_labels = held.labels.data();
    with_queries.dry_run = true;
    CalibrationReport kept_report;
    const Status kept_status = db->Calibrate("single", with_queries, &kept_report);
    ASSERT_TRUE(kept_status.ok()) << kept_status.ToString();
    EXPECT_FALSE(kept_report.match_parameters_fitted);
    EXPECT_NE(kept_report.match_parameters_note.find("two of one label"), std::string::npos)
        << kept_report.match_parameters_note;
    with_queries.match_parameters = CalibrateOptions::MatchParameters::kFit;
    EXPECT_TRUE(db->Calibrate("single", with_queries, nullptr).IsInvalidArgument());
  }

  // Points have none: asking to fit them is an error that stores nothing.
  CollectionSpec points = MakeSpec("p", Kind::kPoint, 8, "Flat");
  ASSERT_TRUE(db->CreateCollection(points).ok());
  CalibrateOptions fit;
  fit.match_parameters = CalibrateOptions::MatchParameters::kFit;
  const Status s = db->Calibrate("p", fit, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("no match parameters"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace hedgedb
