// The Searcher (query/searcher.h) over a collection's state built here as
// Collection builds it: rows packed into a RowTable, a real FAISS index
// trained on them and filled, removed items marked dead and taken out of the
// index, calibration maps. Its results are checked against brute force: every
// item scored with the public ScoreMatrix, the live ones that pass the filter
// ranked best first (ties by id), then the top k or those whose calibrated
// probability clears the threshold.
//
// ScoreMatrix runs the scorer's kernel on each row as stage 2 does, so the
// scores agree to the bit (the contract of include/hedgedb/score.h); the
// first test also checks them against the scalar reference, within 1e-4.
#include "query/searcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "calibration/calibration_map.h"
#include "calibration/fit.h"
#include "calibration/report.h"
#include "common/row_layout.h"
#include "hedgedb/calibration.h"
#include "hedgedb/score.h"
#include "index/coarse_index.h"
#include "query/row_table.h"
#include "query/scalar_reference.h"
#include "query/scorer.h"

namespace hedgedb {
namespace query {
namespace {

// Labelled embeddings in classes (as `hedgedb generate` makes them): item i
// has class i % classes, unless it is one of the unlabelled ones.
struct Data {
  CollectionSpec spec;
  int64_t n = 0;
  std::vector<float> mean, var;  // gaussian
  std::vector<int32_t> codes;    // codes
  std::vector<int64_t> ids, labels;
  std::vector<uint8_t> has_label;
  // Queries: gaussian means/variances, or codes log-probability tables.
  int64_t nq = 0;
  std::vector<float> qmean, qvar, qlogp;

  EmbeddingView Items() const {
    EmbeddingView v;
    v.n = n;
    if (spec.kind == Kind::kCodes) {
      v.codes = codes.data();
    } else {
      v.mean = mean.data();
      v.var = var.data();
    }
    return v;
  }
  EmbeddingView Queries() const {
    EmbeddingView v;
    v.n = nq;
    if (spec.kind == Kind::kCodes) {
      v.logp = qlogp.data();
    } else {
      v.mean = qmean.data();
      v.var = qvar.data();
    }
    return v;
  }
};

CollectionSpec GaussianSpec(const std::string& factory) {
  CollectionSpec s;
  s.name = "searcher";
  s.kind = Kind::kGaussian;
  s.dim = 8;
  s.index_factory = factory;
  s.match_a = 1.0f;
  s.match_b = 2.0f;
  s.samples = 8;
  s.seed = 5;
  return s;
}

// n gaussians around `classes` centres; every 17th item has no label. Ids are
// first_id + stride * i (a stride > 1 makes them sparse).
Data GaussianData(const CollectionSpec& spec, int64_t n, int64_t nq, int classes, int64_t first_id,
                  int64_t stride, uint64_t seed) {
  Data d;
  d.spec = spec;
  d.n = n;
  d.nq = nq;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.05f, 0.6f);
  const int dim = spec.dim;
  std::vector<float> centre(size_t(classes) * dim);
  for (float& c : centre) c = 1.5f * normal(rng);
  auto draw = [&](int label, std::vector<float>* mean, std::vector<float>* var) {
    for (int j = 0; j < dim; ++j) {
      mean->push_back(centre[size_t(label) * dim + j] + 0.6f * normal(rng));
      var->push_back(uniform(rng));
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    const int label = int(i % classes);
    draw(label, &d.mean, &d.var);
    d.ids.push_back(first_id + stride * i);
    d.labels.push_back(label);
    d.has_label.push_back(i % 17 == 3 ? 0 : 1);
  }
  for (int64_t q = 0; q < nq; ++q) draw(int((q * 7) % classes), &d.qmean, &d.qvar);
  return d;
}

// A collection's in-memory state, filled as Collection::Ingest and
// Collection::Remove fill it.
class State {
 public:
  explicit State(const Data& data) : spec_(data.spec), table_(ItemRowBytes(data.spec)) {
    const RowShape shape = RowShapeOf(spec_);
    const EmbeddingView items = data.Items();
    std::vector<uint8_t> row(ItemRowBytes(spec_));
    for (int64_t i = 0; i < data.n; ++i) {
      PackItemRow(shape, items, i, row.data());
      table_.Append(data.ids[size_t(i)], data.has_label[size_t(i)] != 0, data.labels[size_t(i)],
                    row.data(), 1);
      max_id_ = std::max(max_id_, data.ids[size_t(i)]);
    }
    EXPECT_TRUE(index::CoarseIndex::Create(spec_, &index_).ok());
    EXPECT_GE(data.n, index_->train_rows_wanted());
    Status s = index_->Train(table_.arena().data(), data.n);
    if (s.ok()) s = index_->Add(table_.arena().data(), data.n, table_.ids().data());
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  // Collection::RetireLocked (RowTable::Retire, IndexKeeper::Retire): dead in
  // memory, out of the index (a tombstone where the index cannot remove it).
  void Remove(const std::vector<int64_t>& ids) {
    table_.Retire(ids);
    bool physical = false;
    ASSERT_TRUE(index_->Remove(ids.data(), int64_t(ids.size()), &physical).ok());
    if (!physical) tombstones_ += int64_t(ids.size());
  }

  SearchState View() const {
    SearchState s;
    s.spec = &spec_;
    s.max_id = max_id_;
    s.rows = &table_;
    s.index = index_.get();
    s.tombstones = tombstones_;
    s.calibrations = &calibrations_;
    s.payload_index = payload_index_.get();
    s.index_stale = index_stale_;
    return s;
  }

  // The payload index as Collection::EnsurePayloadIndex builds it, from
  // each row's payload.
  void IndexPayloads(const std::vector<std::string>& payload_of_row) {
    payload_index_ = std::make_unique<PayloadFieldIndex>();
    for (size_t r = 0; r < payload_of_row.size(); ++r) {
      payload_index_->Add(int64_t(r), payload_of_row[r]);
    }
  }
  // IndexKeeper::MarkStale: searches score every item.
  void MarkIndexStale() { index_stale_ = true; }

  Status Search(const EmbeddingView& queries, const SearchOptions& options,
                std::vector<SearchResult>* results) const {
    SearchPlan plan;
    HEDGEDB_RETURN_IF_ERROR(Searcher::Plan(spec_, queries, options, &plan));
    return Searcher(View()).Run(&plan, options, results);
  }

  const index::CoarseIndex& index() const { return *index_; }
  std::map<ScoreType, calibration::CalibrationMap>& calibrations() { return calibrations_; }

 private:
  CollectionSpec spec_;
  RowTable table_;
  int64_t max_id_ = -1;
  std::unique_ptr<index::CoarseIndex> index_;
  int64_t tombstones_ = 0;
  bool index_stale_ = false;
  std::map<ScoreType, calibration::CalibrationMap> calibrations_;
  std::unique_ptr<PayloadFieldIndex> payload_index_;
};

// A Platt map of the mc score, p = sigmoid(2 logit(s) + 1), at its fit's base
// rate (no prior shift).
calibration::CalibrationMap PlattMap() {
  calibration::CalibrationMap map;
  map.method = calibration::Method::kPlatt;
  map.score_type = ScoreType::kMc;
  map.params = {2.0, 1.0};
  map.fit_base_rate = map.base_rate = 0.1;
  EXPECT_TRUE(map.Validate().ok());
  return map;
}

// What a search of query q should return, by brute force.
struct Brute {
  std::vector<int64_t> items;  // item indices, best first
  std::vector<float> scores;
  std::vector<double> probs;  // with a map
  int64_t passing = 0;
};

// Every live item that passes, best first (ties by id). `dead`: item indices
// removed. For a map, each item's probability as a search computes it: the
// map on the score, and for a conditional map the item's rank in this
// ranking, the next score and the etas.
Brute Rank(const Data& d, const std::vector<float>& scores, int64_t q,
           const std::function<bool(int64_t)>& passes, const std::vector<int64_t>& dead,
           const calibration::CalibrationMap* map = nullptr, float query_eta = NAN,
           const std::vector<float>* item_eta = nullptr) {
  Brute b;
  for (int64_t i = 0; i < d.n; ++i) {
    if (std::count(dead.begin(), dead.end(), i) || !passes(i)) continue;
    b.items.push_back(i);
  }
  b.passing = int64_t(b.items.size());
  const float* s = scores.data() + q * d.n;
  std::sort(b.items.begin(), b.items.end(), [&](int64_t x, int64_t y) {
    if (s[x] != s[y]) return s[x] > s[y];
    return d.ids[size_t(x)] < d.ids[size_t(y)];
  });
  for (size_t j = 0; j < b.items.size(); ++j) {
    b.scores.push_back(s[b.items[j]]);
    if (!map) continue;
    calibration::PairContext context;
    context.rank = int32_t(j + 1);
    if (j + 1 < b.items.size()) context.next_score = s[b.items[j + 1]];
    context.query_eta = query_eta;
    if (item_eta) context.item_eta = (*item_eta)[size_t(b.items[j])];
    b.probs.push_back(map->Apply(s[b.items[j]], &context));
  }
  return b;
}

// The first `count` of `b` against a result's hits: ids, scores (equal
// bits), labels, and probabilities within 1e-6 (float of the same double).
void ExpectHits(const Data& d, const Brute& b, size_t count, const SearchResult& r) {
  ASSERT_EQ(r.hits.size(), count);
  for (size_t j = 0; j < count; ++j) {
    const SearchHit& hit = r.hits[j];
    const int64_t i = b.items[j];
    ASSERT_EQ(hit.id, d.ids[size_t(i)]) << "rank " << j;
    EXPECT_EQ(hit.score, b.scores[j]) << "rank " << j;
    EXPECT_EQ(hit.has_label, d.has_label[size_t(i)] != 0);
    if (hit.has_label) {
      EXPECT_EQ(hit.label, d.labels[size_t(i)]);
    }
    if (!b.probs.empty()) {
      EXPECT_NEAR(hit.prob, b.probs[j], 1e-6) << "rank " << j;
    }
  }
}

std::vector<float> Scores(const Data& d) {
  std::vector<float> scores;
  EXPECT_TRUE(ScoreMatrix(d.spec, d.Queries(), d.Items(), ScoreOptions(), &scores).ok());
  return scores;
}

bool Any(int64_t) { return true; }

class SearcherTest : public ::testing::Test {
 protected:
  // 600 gaussians in 10 classes, dense ids from 100, 3 of them removed; an
  // IVF4,Flat index (4 lists: nprobe 4 scans them all).
  SearcherTest()
      : data_(GaussianData(GaussianSpec("IVF4,Flat"), 600, 6, 10, 100, 1, 11)), state_(data_) {
    state_.Remove({data_.ids[5], data_.ids[250], data_.ids[599]});
    dead_ = {5, 250, 599};
    scores_ = Scores(data_);
  }
  Data data_;
  State state_;
  std::vector<int64_t> dead_;
  std::vector<float> scores_;
};

TEST_F(SearcherTest, ExhaustiveTopKIsTheBruteForceTopK) {
  state_.calibrations()[ScoreType::kMc] = PlattMap();
  const calibration::CalibrationMap& map = state_.calibrations()[ScoreType::kMc];
  SearchOptions options;
  options.k = 10;
  options.exhaustive = true;
  std::vector<SearchResult> results;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  ASSERT_EQ(results.size(), size_t(data_.nq));
  std::vector<float> eta;
  ASSERT_TRUE(ItemUncertainties(data_.spec, data_.Items(), ScoreOptions(), &eta).ok());
  const RowShape shape = RowShapeOf(data_.spec);
  ScoreParams params;
  ASSERT_TRUE(ScoreParamsFor(data_.spec, ScoreType::kDefault, 0, false, 0, &params).ok());
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, Any, dead_, &map);
    ExpectHits(data_, b, 10, results[size_t(q)]);
    EXPECT_EQ(results[size_t(q)].scored, 597);  // every live item
    EXPECT_EQ(results[size_t(q)].passing, -1);
    std::vector<float> qrow(QueryRowSize(data_.spec));
    PackQueryRow(shape, data_.Queries(), q, qrow.data());
    ScalarMcReference reference(shape, params, qrow.data());
    std::vector<uint8_t> row(ItemRowBytes(data_.spec));
    for (size_t j = 0; j < 10; ++j) {
      const SearchHit& hit = results[size_t(q)].hits[j];
      EXPECT_EQ(hit.uncertainty, eta[size_t(b.items[j])]);
      EXPECT_EQ(hit.samples, 8);
      EXPECT_GT(hit.std_error, 0);
      PackItemRow(shape, data_.Items(), b.items[j], row.data());
      EXPECT_NEAR(hit.score, reference.Score(reinterpret_cast<const float*>(row.data())), 1e-4);
    }
  }
}

TEST_F(SearcherTest, TwoStageWithEveryCandidateIsExactAndDefaultsRankTheirCandidates) {
  SearchOptions options;
  options.k = 10;
  options.candidates = data_.n;  // stage 1 returns every live item
  options.nprobe = 4;
  std::vector<SearchResult> results;
  ASSERT_TRUE(state_.index().is_trained());
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  for (int64_t q = 0; q < data_.nq; ++q) {
    ExpectHits(data_, Rank(data_, scores_, q, Any, dead_), 10, results[size_t(q)]);
    EXPECT_EQ(results[size_t(q)].scored, 597);
  }
  // The defaults (k x 10 candidates): each hit has the item's exact score,
  // best first, and no removed item comes back.
  options.candidates = 0;
  options.nprobe = 0;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  for (int64_t q = 0; q < data_.nq; ++q) {
    const SearchResult& r = results[size_t(q)];
    ASSERT_EQ(r.hits.size(), 10u);
    EXPECT_LE(r.scored, 100);
    for (size_t j = 0; j < r.hits.size(); ++j) {
      const int64_t i = r.hits[j].id - 100;
      EXPECT_EQ(std::count(dead_.begin(), dead_.end(), i), 0);
      EXPECT_EQ(r.hits[j].score, scores_[size_t(q * data_.n + i)]);
      if (j > 0) {
        EXPECT_GE(r.hits[j - 1].score, r.hits[j].score);
      }
    }
  }
}

TEST_F(SearcherTest, LabelFiltersReturnTheBestPassingItems) {
  SearchOptions options;
  options.k = 10;
  std::vector<SearchResult> results;
  // Few pass (labels 2 and 5, unlabelled items not): scored exactly.
  options.filter.label_rule = SearchFilter::LabelRule::kIn;
  options.filter.labels = {5, 2};
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  auto in = [&](int64_t i) {
    return data_.has_label[size_t(i)] &&
           (data_.labels[size_t(i)] == 2 || data_.labels[size_t(i)] == 5);
  };
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, in, dead_);
    EXPECT_EQ(results[size_t(q)].passing, b.passing);
    EXPECT_EQ(results[size_t(q)].scored, b.passing);
    ExpectHits(data_, b, 10, results[size_t(q)]);
  }
  // Not label 0: unlabelled items pass.
  options.filter.label_rule = SearchFilter::LabelRule::kNotIn;
  options.filter.labels = {0};
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  auto not0 = [&](int64_t i) {
    return !data_.has_label[size_t(i)] || data_.labels[size_t(i)] != 0;
  };
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, not0, dead_);
    EXPECT_EQ(results[size_t(q)].passing, b.passing);
    ExpectHits(data_, b, 10, results[size_t(q)]);
  }
  // A label no item has: nothing passes.
  options.filter.label_rule = SearchFilter::LabelRule::kIn;
  options.filter.labels = {77};
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  for (const SearchResult& r : results) {
    EXPECT_EQ(r.passing, 0);
    EXPECT_TRUE(r.hits.empty());
  }
}

// More items pass than the searcher scores exhaustively (2048), so stage 1
// runs through the index's filtered scan (PassingSet as FAISS's selector);
// with sparse ids the selector looks ids up in the id map. Asking for every
// candidate makes the result exact.
TEST(SearcherFilteredIndexTest, ManyPassingGoThroughTheIndexFilter) {
  const Data data =
      GaussianData(GaussianSpec("IVF8,Flat"), 2600, 4, 10, int64_t(1) << 40, 7919, 12);
  State state(data);
  state.Remove({data.ids[10], data.ids[11]});
  const std::vector<int64_t> dead = {10, 11};
  const std::vector<float> scores = Scores(data);
  SearchOptions options;
  options.k = 10;
  options.candidates = data.n;
  options.nprobe = 8;
  options.filter.label_rule = SearchFilter::LabelRule::kNotIn;
  options.filter.labels = {0};
  auto not0 = [&](int64_t i) { return !data.has_label[size_t(i)] || data.labels[size_t(i)] != 0; };
  std::vector<SearchResult> results;
  ASSERT_TRUE(state.Search(data.Queries(), options, &results).ok());
  for (int64_t q = 0; q < data.nq; ++q) {
    const Brute b = Rank(data, scores, q, not0, dead);
    ASSERT_GT(b.passing, 2048);
    EXPECT_EQ(results[size_t(q)].passing, b.passing);
    EXPECT_EQ(results[size_t(q)].scored, b.passing);  // every passing item, none other
    ExpectHits(data, b, 10, results[size_t(q)]);
  }
}

TEST_F(SearcherTest, MinProbReturnsEveryItemThatClearsIt) {
  state_.calibrations()[ScoreType::kMc] = PlattMap();
  const calibration::CalibrationMap& map = state_.calibrations()[ScoreType::kMc];
  SearchOptions options;
  options.min_prob = 0.3;
  std::vector<SearchResult> exhaustive, through_index;
  options.exhaustive = true;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &exhaustive).ok());
  // Through the index, asking for every candidate in the first round.
  options.exhaustive = false;
  options.candidates = data_.n;
  options.nprobe = 4;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &through_index).ok());
  size_t total = 0;
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, Any, dead_, &map);
    size_t clear = 0;
    while (clear < b.probs.size() && b.probs[clear] >= 0.3) ++clear;
    for (size_t j = clear; j < b.probs.size(); ++j) ASSERT_LT(b.probs[j], 0.3);
    total += clear;
    ExpectHits(data_, b, clear, exhaustive[size_t(q)]);
    ExpectHits(data_, b, clear, through_index[size_t(q)]);
    EXPECT_FALSE(exhaustive[size_t(q)].truncated);
    EXPECT_EQ(exhaustive[size_t(q)].scored, 597);
  }
  ASSERT_GT(total, size_t(data_.nq));  // not a vacuous threshold
  ASSERT_LT(total, size_t(data_.nq) * 597);
  // max_results cuts the list and says so.
  options.max_results = 2;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &through_index).ok());
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, Any, dead_, &map);
    const size_t clear =
        size_t(std::count_if(b.probs.begin(), b.probs.end(), [](double p) { return p >= 0.3; }));
    ExpectHits(data_, b, std::min<size_t>(clear, 2), through_index[size_t(q)]);
    EXPECT_EQ(through_index[size_t(q)].truncated, clear > 2);
  }
}

TEST_F(SearcherTest, MinProbWithALabelFilter) {
  state_.calibrations()[ScoreType::kMc] = PlattMap();
  const calibration::CalibrationMap& map = state_.calibrations()[ScoreType::kMc];
  SearchOptions options;
  options.min_prob = 0.2;
  options.filter.label_rule = SearchFilter::LabelRule::kIn;
  options.filter.labels = {0, 3, 7};
  auto in = [&](int64_t i) {
    const int64_t l = data_.labels[size_t(i)];
    return data_.has_label[size_t(i)] && (l == 0 || l == 3 || l == 7);
  };
  std::vector<SearchResult> results;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  size_t total = 0;
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, in, dead_, &map);
    const size_t clear =
        size_t(std::count_if(b.probs.begin(), b.probs.end(), [](double p) { return p >= 0.2; }));
    total += clear;
    EXPECT_EQ(results[size_t(q)].passing, b.passing);
    ExpectHits(data_, b, clear, results[size_t(q)]);
  }
  ASSERT_GT(total, 0u);
}

TEST_F(SearcherTest, CoverageIsAThresholdSearchAtTheConformalThreshold) {
  calibration::CalibrationMap map = PlattMap();
  // 19 conformal queries: coverage 0.9 cuts at the 2nd lowest, 0.4.
  for (int i = 0; i < 19; ++i) map.conformal_scores.push_back(i == 0 ? 0.1 : 0.4 + 0.03 * i);
  ASSERT_TRUE(map.Validate().ok());
  double tau = 0;
  ASSERT_TRUE(map.ConformalThreshold(0.9, &tau).ok());
  ASSERT_DOUBLE_EQ(tau, 0.43);
  state_.calibrations()[ScoreType::kMc] = map;
  SearchOptions options;
  options.coverage = 0.9;
  options.exhaustive = true;
  std::vector<SearchResult> results;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, Any, dead_, &map);
    const size_t clear =
        size_t(std::count_if(b.probs.begin(), b.probs.end(), [&](double p) { return p >= tau; }));
    ExpectHits(data_, b, clear, results[size_t(q)]);
  }
}

// A conditional map reads each hit's rank, the score ranked after it and the
// etas: the exhaustive searches rank every live item, as brute force does.
TEST_F(SearcherTest, ConditionalMapSeesTheRankingBruteForceSees) {
  // Fit on the first 200 items as queries against all (as calibrate does).
  const int64_t fit_queries = 200;
  EmbeddingView fit = data_.Items();
  fit.n = fit_queries;
  std::vector<float> pairs;
  ASSERT_TRUE(ScoreMatrix(data_.spec, fit, data_.Items(), ScoreOptions(), &pairs).ok());
  std::vector<int64_t> self(static_cast<size_t>(fit_queries));
  for (int64_t i = 0; i < fit_queries; ++i) self[size_t(i)] = i;
  std::vector<float> item_eta;
  ASSERT_TRUE(ItemUncertainties(data_.spec, data_.Items(), ScoreOptions(), &item_eta).ok());
  // The conditional map itself (FitConditional), not the held-out choice
  // among methods, which on 200 queries may keep a simpler map: this test
  // is about what the searcher hands the map. Pairs ranked as calibrate
  // ranks them (RankQueryPairs), with the query's eta.
  std::vector<calibration::ScoredPair> ranked;
  for (int64_t q = 0; q < fit_queries; ++q) {
    calibration::QueryPairs qp;
    qp.eta = item_eta[size_t(q)];
    std::vector<int64_t> order;
    for (int64_t j = 0; j < data_.n; ++j) {
      if (j != self[size_t(q)]) order.push_back(j);
    }
    const float* row = pairs.data() + q * data_.n;
    std::stable_sort(order.begin(), order.end(),
                     [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (const int64_t j : order) {
      calibration::ScoredPair pair{double(row[j]),
                                   data_.labels[size_t(q)] == data_.labels[size_t(j)]};
      pair.query = int32_t(q);
      pair.context.query_eta = qp.eta;
      pair.context.item_eta = item_eta[size_t(j)];
      qp.pairs.push_back(pair);
    }
    calibration::RankQueryPairs(&qp, 0);
    ranked.insert(ranked.end(), qp.pairs.begin(), qp.pairs.end());
  }
  calibration::FitOptions fit_options;
  fit_options.score_type = ScoreType::kMc;
  calibration::CalibrationMap map;
  ASSERT_TRUE(calibration::FitConditional(ranked, fit_options, &map).ok());
  ASSERT_TRUE(map.conditional()) << calibration::MethodName(map.method);
  state_.calibrations()[ScoreType::kMc] = map;

  const RowShape shape = RowShapeOf(data_.spec);
  ScoreParams params;
  ASSERT_TRUE(ScoreParamsFor(data_.spec, ScoreType::kDefault, 0, false, 0, &params).ok());
  SearchOptions topk;
  topk.k = 10;
  topk.exhaustive = true;
  topk.with_uncertainty = false;  // the map still reads the etas
  SearchOptions threshold = topk;
  threshold.k = 0;
  threshold.min_prob = 0.5;
  std::vector<SearchResult> top, over;
  ASSERT_TRUE(state_.Search(data_.Queries(), topk, &top).ok());
  ASSERT_TRUE(state_.Search(data_.Queries(), threshold, &over).ok());
  size_t total = 0;
  for (int64_t q = 0; q < data_.nq; ++q) {
    std::vector<float> qrow(QueryRowSize(data_.spec));
    PackQueryRow(shape, data_.Queries(), q, qrow.data());
    const float query_eta = map.ReadsQueryEta() ? Uncertainty(shape, params, qrow.data()) : NAN;
    const Brute b = Rank(data_, scores_, q, Any, dead_, &map, query_eta,
                         map.ReadsItemEta() ? &item_eta : nullptr);
    ExpectHits(data_, b, 10, top[size_t(q)]);
    // The conditional probability need not fall with the rank: every
    // ranked item that clears it, in ranking order.
    Brute clear;
    for (size_t j = 0; j < b.items.size(); ++j) {
      if (b.probs[j] < 0.5) continue;
      clear.items.push_back(b.items[j]);
      clear.scores.push_back(b.scores[j]);
      clear.probs.push_back(b.probs[j]);
    }
    total += clear.items.size();
    ExpectHits(data_, clear, clear.items.size(), over[size_t(q)]);
  }
  ASSERT_GT(total, 0u);
}

// Codes over a flat PQ index: stage 1 scans the arena's codes exactly, so
// the default candidates give the exact top k.
TEST(SearcherCodesTest, ArenaScanFindsTheBruteForceTopK) {
  Data d;
  d.spec.name = "codes";
  d.spec.kind = Kind::kCodes;
  d.spec.dim = 12;
  d.spec.code_k = 8;
  d.n = 800;
  d.nq = 5;
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int> symbol(0, 7);
  for (int64_t i = 0; i < d.n * d.spec.dim; ++i) d.codes.push_back(symbol(rng));
  for (int64_t i = 0; i < d.n; ++i) {
    d.ids.push_back(i);
    d.labels.push_back(i % 5);
    d.has_label.push_back(1);
  }
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (int64_t q = 0; q < d.nq * d.spec.dim; ++q) {  // log-softmax rows
    float logits[8], top = -1e30f, sum = 0;
    for (float& l : logits) top = std::max(top, l = normal(rng));
    for (float l : logits) sum += std::exp(l - top);
    for (float l : logits) d.qlogp.push_back(l - top - std::log(sum));
  }
  State state(d);
  ASSERT_EQ(state.index().shape().ivf_lists, 0);
  state.Remove({d.ids[0], d.ids[1]});
  const std::vector<float> scores = Scores(d);
  SearchOptions options;
  options.k = 10;
  std::vector<SearchResult> results;
  ASSERT_TRUE(state.Search(d.Queries(), options, &results).ok());
  for (int64_t q = 0; q < d.nq; ++q) {
    ExpectHits(d, Rank(d, scores, q, Any, {0, 1}), 10, results[size_t(q)]);
    EXPECT_LE(results[size_t(q)].scored, 100);  // k x 10 candidates, not every item
  }
}

// Payload conditions read the payload index; with a label condition both
// must hold.
TEST_F(SearcherTest, PayloadFiltersReadThePayloadIndex) {
  std::vector<std::string> payloads;
  for (int64_t i = 0; i < data_.n; ++i) {
    payloads.push_back(i % 5 == 0 ? "not json" : "{\"g\": " + std::to_string(i % 3) + "}");
  }
  state_.IndexPayloads(payloads);
  SearchOptions options;
  options.k = 10;
  options.filter.payload_equals = {{"g", "1"}};
  std::vector<SearchResult> results;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  auto g1 = [](int64_t i) { return i % 5 != 0 && i % 3 == 1; };
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, g1, dead_);
    EXPECT_EQ(results[size_t(q)].passing, b.passing);
    ExpectHits(data_, b, 10, results[size_t(q)]);
  }
  options.filter.label_rule = SearchFilter::LabelRule::kIn;
  options.filter.labels = {4};
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  auto g1_label4 = [&](int64_t i) {
    return g1(i) && data_.has_label[size_t(i)] && data_.labels[size_t(i)] == 4;
  };
  for (int64_t q = 0; q < data_.nq; ++q) {
    const Brute b = Rank(data_, scores_, q, g1_label4, dead_);
    ASSERT_GT(b.passing, 0);
    EXPECT_EQ(results[size_t(q)].passing, b.passing);
    ExpectHits(data_, b, std::min<size_t>(10, size_t(b.passing)), results[size_t(q)]);
  }
  // A value no payload has: nothing passes.
  options.filter.payload_equals = {{"g", "7"}};
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  EXPECT_EQ(results[0].passing, 0);
  EXPECT_TRUE(results[0].hits.empty());
}

// A stale index is never asked: every live item is scored.
TEST_F(SearcherTest, AStaleIndexMakesSearchesExhaustive) {
  state_.MarkIndexStale();
  SearchOptions options;
  options.k = 10;
  std::vector<SearchResult> results;
  ASSERT_TRUE(state_.Search(data_.Queries(), options, &results).ok());
  for (int64_t q = 0; q < data_.nq; ++q) {
    EXPECT_EQ(results[size_t(q)].scored, 597);
    ExpectHits(data_, Rank(data_, scores_, q, Any, dead_), 10, results[size_t(q)]);
  }
}

TEST_F(SearcherTest, RefusesWhatItCannotRun) {
  std::vector<SearchResult> results;
  SearchOptions options;
  options.min_prob = 0.5;
  Status s = state_.Search(data_.Queries(), options, &results);  // no map stored
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("min-prob needs a calibration of score mc"), std::string::npos)
      << s.ToString();
  options.coverage = 0.9;
  s = state_.Search(data_.Queries(), options, &results);
  EXPECT_NE(s.ToString().find("coverage and min-prob exclude each other"), std::string::npos)
      << s.ToString();
  // Plan checks the filter too, before any state is read.
  SearchOptions filtered;
  filtered.filter.label_rule = SearchFilter::LabelRule::kIn;
  SearchPlan plan;
  s = Searcher::Plan(data_.spec, data_.Queries(), filtered, &plan);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // A plan holds the packed queries.
  ASSERT_TRUE(Searcher::Plan(data_.spec, data_.Queries(), SearchOptions(), &plan).ok());
  EXPECT_EQ(plan.queries, data_.nq);
  EXPECT_EQ(plan.rows.size(), size_t(data_.nq) * QueryRowSize(data_.spec));
  EXPECT_EQ(plan.rows[0], data_.qmean[0]);
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
