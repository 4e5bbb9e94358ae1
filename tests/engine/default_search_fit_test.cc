// The fit of the default search (query/knob_fit.h): when the coarse order
// and the score's order differ enough that the top-100 coarse candidates
// miss the true top-10, the collection fits a larger candidate count, and a
// search that leaves candidates and oversampling at their defaults reaches
// the target final recall@10 (against the exhaustive search, independent of
// the fit's own truth); the fitted values survive a reopen; explicit
// candidates or oversampling win; on clustered data the fit probes fewer
// lists than the static nprobe (its ladder starts at one list), and the
// recall it records is what a search at its knobs finds; an index file from
// before the fit (format version 2) still opens, searches with 10 x k, and
// is fitted at its next save; a flat coarse index (Flat, SQ8) has its
// candidates fitted alone.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "index/index_file.h"
#include "query/knob_fit.h"

namespace hedgedb {
namespace testing {
namespace {

constexpr int kDim = 8;
constexpr int64_t kItems = 20000;  // IVF64 trains at 39 x 64 = 2,496 items

CollectionSpec DenseSpec() {
  CollectionSpec spec;
  spec.name = "dense";
  spec.kind = Kind::kGaussian;  // default score: mc
  spec.dim = kDim;
  spec.index_factory = "IVF64,Flat";
  return spec;
}

// Gaussians of widely varying variance packed densely around one centre:
// many items at nearly the same coarse distance ([mu, sqrt(tr S)] against
// [mu_q, 0]) whose Monte Carlo match scores differ, so the exact top-10 by
// score lies deeper than the 100 nearest coarse vectors.
Batch Dense(int64_t n, int64_t first_id, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> var(0.05f, 1.5f);
  Batch b;
  b.n = n;
  for (int64_t i = 0; i < n; ++i) {
    b.ids.push_back(first_id + i);
    for (int d = 0; d < kDim; ++d) {
      b.mean.push_back(normal(rng));
      b.var.push_back(var(rng));
    }
  }
  return b;
}

// Rows `rows` of `items` (of dimension `dim`) as queries.
Batch Pick(const Batch& items, const std::vector<int64_t>& rows, int dim = kDim) {
  Batch q;
  q.n = int64_t(rows.size());
  for (int64_t r : rows) {
    q.mean.insert(q.mean.end(), items.mean.begin() + r * dim, items.mean.begin() + (r + 1) * dim);
    q.var.insert(q.var.end(), items.var.begin() + r * dim, items.var.begin() + (r + 1) * dim);
  }
  return q;
}

// The fraction of the exhaustive search's top-10 that a search with
// `options` returns.
double RecallAt10(DB* db, const Batch& queries, SearchOptions options) {
  options.k = 10;
  options.with_uncertainty = false;
  return RecallAgainstExhaustive(db, "dense", queries, options);
}

SearchOptions Candidates(int64_t c) {
  SearchOptions o;
  o.candidates = c;
  return o;
}

// Queries: 100 new items drawn as the collection's were (not in it), and 50
// of the collection's own items other than the fit's (rows q * n / 50).
struct Queries {
  Batch fresh, own;
};

Queries QueriesOf(const Batch& items) {
  std::vector<int64_t> own_rows;
  for (int64_t q = 0; q < query::kFitQueries; ++q) {
    own_rows.push_back(q * kItems / query::kFitQueries + kItems / query::kFitQueries / 2);
  }
  return {Dense(100, kItems * 10, 11), Pick(items, own_rows)};
}

std::string IndexFile(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir + "/index")) {
    if (e.path().extension() == ".hidx") return e.path().string();
  }
  ADD_FAILURE() << "no index file";
  return "";
}

// Reopens *db and expects the fit `st` of "dense" loaded with the index
// file, not fitted again in this process.
void ExpectFitReloaded(std::unique_ptr<DB>* db, const std::string& dir, const Options& options,
                       const CollectionStats& st) {
  db->reset();
  *db = OpenDb(dir, options);
  const CollectionStats again = StatsOf(db->get(), "dense");
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  EXPECT_EQ(again.index_note, "");
  EXPECT_EQ(again.index_candidates, st.index_candidates);
  EXPECT_EQ(again.index_nprobe, st.index_nprobe);
  EXPECT_TRUE(same(again.index_recall_estimate, st.index_recall_estimate));
  EXPECT_TRUE(same(again.index_coarse_recall, st.index_coarse_recall));
  EXPECT_EQ(again.index_fit_seconds, 0);
}

TEST(DefaultSearchFitTest, FitsMoreCandidatesWhereTheCoarseOrderMissesTheTopTen) {
  TempDir dir;
  Options options;
  options.index_recheck_fraction = 0;  // the fit at training only
  auto db = OpenDb(dir.path(), options);
  ASSERT_TRUE(db->CreateCollection(DenseSpec()).ok());
  const Batch items = Dense(kItems, 0, 3);
  ASSERT_TRUE(db->Ingest("dense", items.ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());  // trains, fits, saves
  const Queries queries = QueriesOf(items);

  // The data is what the fit is for: 100 candidates miss the true top-10
  // however many lists are probed.
  SearchOptions all_lists = Candidates(100);
  all_lists.nprobe = 64;
  const double at_100 = RecallAt10(db.get(), queries.fresh, all_lists);
  EXPECT_LT(at_100, query::kTargetFinalRecall - 0.03);

  const CollectionStats st = StatsOf(db.get(), "dense");
  EXPECT_GT(st.index_candidates, 100);
  EXPECT_LE(st.index_candidates, 1600);
  EXPECT_GT(st.index_nprobe, 0);
  EXPECT_GE(st.index_recall_estimate, query::kTargetFinalRecall);
  EXPECT_GT(st.index_fit_seconds, 0);
  EXPECT_TRUE(std::isfinite(st.index_coarse_recall));

  // The default search reaches the target (up to the sampling noise of the
  // fit's 50 queries) on queries the fit did not see, checked against the
  // exhaustive search; it is what the fitted candidates give, not 10 x k.
  const double by_default = RecallAt10(db.get(), queries.fresh, SearchOptions());
  EXPECT_GE(by_default, query::kTargetFinalRecall - 0.015);
  EXPECT_GE(RecallAt10(db.get(), queries.own, SearchOptions()), query::kTargetFinalRecall - 0.015);
  EXPECT_DOUBLE_EQ(by_default,
                   RecallAt10(db.get(), queries.fresh, Candidates(st.index_candidates)));
  EXPECT_GT(by_default, RecallAt10(db.get(), queries.fresh, Candidates(100)) + 0.03);
  // For the record (--gtest_output=xml).
  RecordProperty("recall_at_100_candidates", std::to_string(at_100));
  RecordProperty("fitted_candidates", std::to_string(st.index_candidates));
  RecordProperty("fitted_nprobe", std::to_string(st.index_nprobe));
  RecordProperty("recall_by_default", std::to_string(by_default));
  RecordProperty("coarse_recall", std::to_string(st.index_coarse_recall));

  // Explicit candidates or oversampling win over the fit.
  SearchOptions one;
  one.k = 10;
  one.with_uncertainty = false;
  std::vector<SearchResult> res;
  one.candidates = 10;
  ASSERT_TRUE(db->Search("dense", queries.fresh.view(), one, &res).ok());
  EXPECT_EQ(res[0].scored, 10);
  one.candidates = 0;
  one.oversampling = 3;
  ASSERT_TRUE(db->Search("dense", queries.fresh.view(), one, &res).ok());
  EXPECT_EQ(res[0].scored, 30);
  one.oversampling = 0;
  ASSERT_TRUE(db->Search("dense", queries.fresh.view(), one, &res).ok());
  EXPECT_EQ(res[0].scored, st.index_candidates);
  one.oversampling = -1;
  EXPECT_TRUE(db->Search("dense", queries.fresh.view(), one, &res).IsInvalidArgument());

  // The fit is saved with the index: a reopen loads it.
  ExpectFitReloaded(&db, dir.path(), options, st);
  EXPECT_DOUBLE_EQ(RecallAt10(db.get(), queries.fresh, SearchOptions()), by_default);
}

// Clustered data: Gaussians around kCentres centres (N(0, 1) in 16
// dimensions, means 0.2 from their centre per dimension), about 100 items a
// cluster and three clusters a list of IVF64. The true top-10 of an item
// lies in its own cluster, which one or two lists hold.
constexpr int kClusteredDim = 16;
constexpr int kCentres = 200;

CollectionSpec ClusteredSpec() {
  CollectionSpec spec;
  spec.name = "clustered";
  spec.kind = Kind::kGaussian;
  spec.dim = kClusteredDim;
  spec.index_factory = "IVF64,Flat";  // static nprobe max(8, 64 / 64) = 8
  spec.match_a = 1.0f;
  spec.match_b = 5.0f;
  return spec;
}

Batch Clustered(const std::vector<float>& centres, int64_t n, int64_t first_id, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.2f);
  std::uniform_real_distribution<float> var(0.02f, 0.2f);
  std::uniform_int_distribution<int> centre(0, kCentres - 1);
  Batch b;
  b.n = n;
  for (int64_t i = 0; i < n; ++i) {
    const int c = centre(rng);
    b.ids.push_back(first_id + i);
    for (int d = 0; d < kClusteredDim; ++d) {
      b.mean.push_back(centres[size_t(c * kClusteredDim + d)] + noise(rng));
      b.var.push_back(var(rng));
    }
  }
  return b;
}

TEST(DefaultSearchFitTest, ClusteredDataIsFittedBelowTheStaticNprobe) {
  TempDir dir;
  Options options;
  options.index_recheck_fraction = 0;
  auto db = OpenDb(dir.path(), options);
  ASSERT_TRUE(db->CreateCollection(ClusteredSpec()).ok());
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(size_t(kCentres * kClusteredDim));
  for (float& c : centres) c = normal(rng);
  const Batch items = Clustered(centres, kItems, 0, 22);
  ASSERT_TRUE(db->Ingest("clustered", items.ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  const CollectionStats st = StatsOf(db.get(), "clustered");
  // One or two lists hold an item's cluster: fewer than the static nprobe
  // (8 for IVF64), where the fit's ladder once started.
  EXPECT_GE(st.index_nprobe, 1);
  EXPECT_LT(st.index_nprobe, 8);
  EXPECT_GE(st.index_recall_estimate, query::kTargetFinalRecall);
  RecordProperty("fitted_nprobe", std::to_string(st.index_nprobe));
  RecordProperty("fitted_candidates", std::to_string(st.index_candidates));
  RecordProperty("recall_estimate", std::to_string(st.index_recall_estimate));

  // The recall the fit recorded is what a search at its knobs finds against
  // the exhaustive search, counted as the fit counts it: its queries (the
  // items at rows q x n / 50, whose ids are their rows here), each left out
  // of its own rankings, with one more candidate for the query's own item.
  std::vector<int64_t> rows;
  for (int64_t q = 0; q < query::kFitQueries; ++q) rows.push_back(q * kItems / query::kFitQueries);
  SearchOptions at_fit;
  at_fit.k = 11;
  at_fit.nprobe = st.index_nprobe;
  at_fit.candidates = st.index_candidates + 1;
  at_fit.with_uncertainty = false;
  const double measured = RecallAgainstExhaustive(db.get(), "clustered",
                                                  Pick(items, rows, kClusteredDim), at_fit, &rows);
  EXPECT_NEAR(measured, st.index_recall_estimate, 1e-9);
  // Queries the collection does not hold: the default search reaches the
  // target, up to the sampling noise of the fit's 50 queries.
  SearchOptions defaults;
  defaults.with_uncertainty = false;
  const double fresh = RecallAgainstExhaustive(db.get(), "clustered",
                                               Clustered(centres, 200, kItems * 10, 23), defaults);
  EXPECT_GE(fresh, query::kTargetFinalRecall - 0.015);
  RecordProperty("recall_of_fresh_queries", std::to_string(fresh));
}

TEST(DefaultSearchFitTest, AnIndexFileFromBeforeTheFitOpensAndIsFittedAtItsNextSave) {
  TempDir dir;
  Options options;
  options.index_recheck_fraction = 0;
  const Batch items = Dense(kItems, 0, 3);
  const Queries queries = QueriesOf(items);
  CollectionStats fitted;
  {
    auto db = OpenDb(dir.path(), options);
    ASSERT_TRUE(db->CreateCollection(DenseSpec()).ok());
    ASSERT_TRUE(db->Ingest("dense", items.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    fitted = StatsOf(db.get(), "dense");
  }
  // Rewrite the file as a build before version 3 wrote it: the same FAISS
  // blob, sequence and binding; its one recall was stage 1's.
  const std::string path = IndexFile(dir.path());
  std::string file;
  {
    std::ifstream in(path, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The header, and the payload split into the upkeep record and the blob.
  auto split = [&path](const std::string& bytes, index::IndexFileHeader* h, std::string* record,
                       std::string* blob) {
    const std::string_view header(bytes.data(), index::kIndexHeaderBytes);
    ASSERT_TRUE(index::ParseIndexFileHeader(header, bytes.size(), path, h).ok());
    const std::string_view payload = std::string_view(bytes).substr(index::kIndexHeaderBytes);
    std::string_view r, b;
    ASSERT_TRUE(index::SplitIndexPayload(*h, payload, path, &r, &b).ok());
    *record = std::string(r);
    *blob = std::string(b);
  };
  index::IndexFileHeader parsed;
  std::string record, blob;
  split(file, &parsed, &record, &blob);
  ASSERT_EQ(parsed.version, 3u);
  {
    const uint32_t coarse_bp = uint32_t(std::lround(fitted.index_coarse_recall * 10000));
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << index::EncodeIndexFileHeader(coarse_bp, parsed.sequence, parsed.binding, blob, 2)
        << blob;
  }
  auto db = OpenDb(dir.path(), options);
  CollectionStats old = StatsOf(db.get(), "dense");
  EXPECT_EQ(old.index_note, "");  // loaded, not rebuilt
  EXPECT_TRUE(old.index_trained);
  EXPECT_EQ(old.index_nprobe, fitted.index_nprobe);
  EXPECT_EQ(old.index_candidates, 0);  // none fitted: searches ask for 10 x k
  EXPECT_TRUE(std::isnan(old.index_recall_estimate));
  EXPECT_EQ(old.index_coarse_recall, fitted.index_coarse_recall);
  std::vector<SearchResult> res;
  SearchOptions defaults;
  ASSERT_TRUE(db->Search("dense", queries.fresh.view(), defaults, &res).ok());
  EXPECT_EQ(res[0].scored, 100);
  // The next save fits the candidates.
  const Batch more = Dense(10, kItems, 4);
  ASSERT_TRUE(db->Ingest("dense", more.ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  const CollectionStats refit = StatsOf(db.get(), "dense");
  EXPECT_GT(refit.index_candidates, 100);
  EXPECT_GE(refit.index_recall_estimate, query::kTargetFinalRecall);
  std::string rewritten;
  {
    std::ifstream in(path, std::ios::binary);
    rewritten.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  split(rewritten, &parsed, &record, &blob);
  EXPECT_EQ(parsed.version, 3u);
  index::IndexUpkeep upkeep;
  ASSERT_TRUE(index::DecodeIndexUpkeep(record, path, &upkeep).ok());
  EXPECT_EQ(upkeep.oversampling * 10, refit.index_candidates);
}

// A flat coarse index (stage 1 scans every coarse vector: Flat, SQ8) has
// no knob, but its coarse order misses the true top-10 as an IVF probing
// every list does: the collection fits the candidates alone (Flat at its
// first save with 1,000 items, SQ8 at its training), a default search uses
// them and reaches the target, and they are saved with the index.
class FlatFitTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FlatFitTest, FitsTheCandidatesWhereTheCoarseOrderMissesTheTopTen) {
  TempDir dir;
  Options options;
  options.index_recheck_fraction = 0;
  auto db = OpenDb(dir.path(), options);
  CollectionSpec spec = DenseSpec();
  spec.index_factory = GetParam();
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  const Batch items = Dense(kItems, 0, 3);
  ASSERT_TRUE(db->Ingest("dense", items.ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());  // (trains,) fits, saves
  const Queries queries = QueriesOf(items);

  // The static count (10 x k) misses the true top-10: exhaustive stage 1
  // ranks by the coarse distance, not by the score.
  const double at_static = RecallAt10(db.get(), queries.fresh, Candidates(100));
  EXPECT_LT(at_static, 0.98);

  const CollectionStats st = StatsOf(db.get(), "dense");
  EXPECT_TRUE(st.index_trained);
  EXPECT_EQ(st.index_nprobe, 0);
  EXPECT_EQ(st.index_ef_search, 0);
  EXPECT_GT(st.index_candidates, 100);
  EXPECT_LE(st.index_candidates, 1600);
  EXPECT_EQ(st.index_candidates % 10, 0);
  EXPECT_GE(st.index_recall_estimate, query::kTargetFinalRecall);
  EXPECT_GT(st.index_fit_seconds, 0);
  EXPECT_TRUE(std::isnan(st.index_coarse_recall));  // no knob to measure it at

  // The default search uses the fitted candidates and reaches the target on
  // queries the fit did not see, against the exhaustive search.
  const double by_default = RecallAt10(db.get(), queries.fresh, SearchOptions());
  EXPECT_GE(by_default, 0.98);
  EXPECT_GE(RecallAt10(db.get(), queries.own, SearchOptions()), 0.98);
  SearchOptions defaults;
  defaults.with_uncertainty = false;
  std::vector<SearchResult> res;
  ASSERT_TRUE(db->Search("dense", queries.fresh.view(), defaults, &res).ok());
  EXPECT_EQ(res[0].scored, st.index_candidates);
  RecordProperty("recall_at_100_candidates", std::to_string(at_static));
  RecordProperty("fitted_candidates", std::to_string(st.index_candidates));
  RecordProperty("recall_by_default", std::to_string(by_default));

  // Saved with the index: a reopen loads it (not fitted again).
  ExpectFitReloaded(&db, dir.path(), options, st);
  EXPECT_DOUBLE_EQ(RecallAt10(db.get(), queries.fresh, SearchOptions()), by_default);
}

INSTANTIATE_TEST_SUITE_P(Flat, FlatFitTest, ::testing::Values("Flat", "SQ8"));

// A database in `dir` with a Flat collection "dense" of `n` Dense items,
// flushed (so saved, and fitted from 1,000 items on).
std::unique_ptr<DB> FlatDb(const std::string& dir, int64_t n) {
  CollectionSpec spec = DenseSpec();
  spec.index_factory = "Flat";
  auto db = OpenDb(dir, Options());
  EXPECT_TRUE(db->CreateCollection(spec).ok());
  EXPECT_TRUE(db->Ingest("dense", Dense(n, 0, 3).ingest(), nullptr).ok());
  EXPECT_TRUE(db->Flush().ok());
  return db;
}

// A flat index below 1,000 items is not fitted yet (as HNSW): its searches
// use 10 x k. Its file, saved without a fit (as every flat index file from
// before flat fits), opens as it is and is fitted at the first save with
// enough items.
TEST(DefaultSearchFitTest, ASmallFlatCollectionIsFittedOnceItHoldsEnoughItems) {
  TempDir dir;
  {
    auto db = FlatDb(dir.path(), 500);
    const CollectionStats st = StatsOf(db.get(), "dense");
    EXPECT_EQ(st.index_candidates, 0);
    EXPECT_TRUE(std::isnan(st.index_recall_estimate));
  }
  auto db = OpenDb(dir.path(), Options());
  const CollectionStats old = StatsOf(db.get(), "dense");
  EXPECT_EQ(old.index_note, "");
  EXPECT_EQ(old.index_candidates, 0);
  ASSERT_TRUE(db->Ingest("dense", Dense(kItems, 500, 4).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  const CollectionStats st = StatsOf(db.get(), "dense");
  EXPECT_GT(st.index_candidates, 100);
  EXPECT_GE(st.index_recall_estimate, query::kTargetFinalRecall);
  EXPECT_GT(st.index_fit_seconds, 0);
}

// A flat index fitted at 1,000 items chose among candidate counts covering
// much of the collection: it is fitted again at the first save once the
// collection holds four times the items of its fit (not before), and the
// count of its fit survives a reopen.
TEST(DefaultSearchFitTest, AFlatIndexIsFittedAgainOnceTheCollectionHasGrownFourfold) {
  TempDir dir;
  {
    auto db = FlatDb(dir.path(), 1000);
    EXPECT_GT(StatsOf(db.get(), "dense").index_fit_seconds, 0);  // fitted at 1,000
  }
  auto db = OpenDb(dir.path(), Options());
  EXPECT_EQ(StatsOf(db.get(), "dense").index_fit_seconds, 0);  // loaded, not fitted
  ASSERT_TRUE(db->Ingest("dense", Dense(2999, 1000, 4).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  EXPECT_EQ(StatsOf(db.get(), "dense").index_fit_seconds, 0) << "3,999 items: not yet";
  ASSERT_TRUE(db->Ingest("dense", Dense(1, 3999, 5).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  const CollectionStats refit = StatsOf(db.get(), "dense");
  EXPECT_GT(refit.index_fit_seconds, 0) << "4,000 items: fitted again";
  EXPECT_GE(refit.index_recall_estimate, query::kTargetFinalRecall);
  // Reopened, the second fit (4,000 items) is the baseline: growing to
  // 15,999 does not fit again.
  db.reset();
  db = OpenDb(dir.path(), Options());
  EXPECT_EQ(StatsOf(db.get(), "dense").index_candidates, refit.index_candidates);
  ASSERT_TRUE(db->Ingest("dense", Dense(11999, 4000, 6).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  EXPECT_EQ(StatsOf(db.get(), "dense").index_fit_seconds, 0);
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
