// What a search asks (filter, options) and what it returns (hits, results).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hedgedb/kinds.h"

namespace hedgedb {

// Which items a search may return (SearchOptions::filter). The conditions
// are ANDed; the default filter lets every item through. A filtered search
// returns the best k items that pass (exactly those that pass, when fewer
// than k do): the filter is applied inside stage 1, not after it
// (docs/concepts.md, "Filtered search").
struct SearchFilter {
  enum class LabelRule {
    kAny,    // no condition on the label
    kIn,     // the item has a label and it is one of `labels` ({x}: equals x)
    kNotIn,  // the item has no label, or a label that is not in `labels`
  };
  LabelRule label_rule = LabelRule::kAny;
  std::vector<int64_t> labels;  // at least one with kIn / kNotIn
  // (field, value): the item's payload, read as a JSON object, has the
  // top-level field `field` equal to `value`, a JSON scalar written as JSON
  // text: "\"red\"", "3", "2.5", "true", "null". Numbers compare by value
  // (3 equals 3.0); strings exactly (no case folding). A payload that is not
  // a JSON object, lacks the field or holds an array or object there does
  // not pass.
  std::vector<std::pair<std::string, std::string>> payload_equals;

  bool empty() const { return label_rule == LabelRule::kAny && payload_equals.empty(); }
};

// The largest HNSW efSearch a search takes (SearchOptions::ef_search), and
// the widest a filtered or threshold search widens stage 1 to by itself.
constexpr int kMaxEfSearch = 1 << 14;

// Candidates per result where the collection's index has none fitted
// (SearchOptions::oversampling 0).
constexpr int kDefaultOversampling = 10;

struct SearchOptions {
  // Number of results per query.
  int k = 10;
  ScoreType score = ScoreType::kDefault;
  // Stage-1 candidate count; 0 means k * oversampling.
  int64_t candidates = 0;
  // Candidates per result; 0: the collection's default, fitted with its IVF
  // or HNSW index to the final recall@k (CollectionStats::index_candidates,
  // docs/concepts.md "Coarse indexes"), kDefaultOversampling (10) where none
  // is fitted. An explicit candidates or oversampling wins over the fit.
  int oversampling = 0;
  // Skip stage 1 and score every item exactly (the ground truth).
  bool exhaustive = false;
  // Monte Carlo samples per side; 0 uses the collection's default.
  int samples = 0;
  // mc only: start at `samples` and double K (up to max_samples) for the
  // candidates whose 95% interval (score +- 1.96 standard errors) straddles
  // the boundary between rank k and k + 1, until none does. Results carry
  // the K their score was computed with (SearchHit::samples).
  bool adaptive_samples = false;
  int max_samples = 64;
  // Seed of the Monte Carlo samples; used when has_seed, else the collection's.
  bool has_seed = false;
  uint64_t seed = 0;
  // FAISS knobs; 0 keeps the index's own setting. ef_search is at most
  // kMaxEfSearch (a larger one is refused: FAISS allocates per unit of it).
  int nprobe = 0;
  int ef_search = 0;
  // Compute eta for every result and the query (costs 2 extra sample sets
  // each) and, for mc, each result's standard error.
  bool with_uncertainty = true;
  // Fill SearchHit::payload (one record-store read per result).
  bool with_payload = false;
  // Threshold search: with min_prob > 0 (at most 1), return every item whose
  // calibrated probability is at least min_prob, best first, at most
  // max_results per query, instead of the top k (k is ignored). Needs a
  // calibration of the score (DB::Calibrate). Stage 1 widens (candidates,
  // nprobe, efSearch doubling) until the worse half of its candidates holds no
  // qualifying item (docs/calibration.md, "Threshold search").
  double min_prob = 0;
  int64_t max_results = 1000;
  // Conformal match sets: with coverage in (0, 1), return the items whose
  // calibrated probability is at least the map's split-conformal threshold
  // for that coverage (a threshold search, at most max_results), so that a
  // query's set holds a same-label item with probability >= coverage over
  // queries exchangeable with the conformal ones. Needs a calibration fitted
  // with a conformal fraction (CalibrateOptions::conformal_fraction);
  // excludes min_prob (docs/calibration.md, "Conformal match sets").
  double coverage = 0;
  // With coverage: the threshold of the query's quartile of eta among the
  // conformal queries (group-conditional, Mondrian), so that coverage holds
  // within each quartile, not only on average (gaussian and mog).
  bool coverage_by_eta = false;
  // Risk-controlled threshold: with max_false_match_rate in (0, 1), return
  // the items whose calibrated probability is at least the smallest
  // threshold whose false-match rate (the share of non-matching pairs that
  // clear it) is at most max_false_match_rate with `confidence`, bounded
  // (Clopper-Pearson) over the held-out queries' non-matching pairs (a
  // threshold search, at most max_results). Needs a calibration fitted with
  // a conformal fraction; excludes min_prob and coverage
  // (docs/calibration.md, "False-match rate").
  double max_false_match_rate = 0;
  double confidence = 0.95;
  // Only items that pass this filter are returned (top-k and threshold
  // search alike).
  SearchFilter filter;
};

struct SearchHit {
  int64_t id = 0;
  float score = 0;
  // eta = 1 - p(m | x, x) of the item; NaN where the kind has none.
  float uncertainty = std::numeric_limits<float>::quiet_NaN();
  // Calibrated P(the item shares the query's label) from the collection's
  // calibration of this score (monotone in score); NaN where the collection
  // has no calibration for the score.
  float prob = std::numeric_limits<float>::quiet_NaN();
  // mc: standard error of score from its K x K Monte Carlo pair terms, and K
  // (with SearchOptions::with_uncertainty or adaptive_samples); NaN and 0
  // otherwise.
  float std_error = std::numeric_limits<float>::quiet_NaN();
  int samples = 0;
  bool has_label = false;
  int64_t label = 0;
  std::string payload;  // with SearchOptions::with_payload
};

struct SearchResult {
  // eta of the query (codes: the mean entropy of its table over the d
  // positions, in units of ln k); NaN for points.
  float query_uncertainty = std::numeric_limits<float>::quiet_NaN();
  std::vector<SearchHit> hits;  // best first
  // Items scored exactly for this query (stage-2 cost).
  int64_t scored = 0;
  // Threshold search: more items qualified than max_results.
  bool truncated = false;
  // With a filter: how many live items pass it (-1: no filter). Fewer than
  // k means the hits are exactly those items.
  int64_t passing = -1;
};

}  // namespace hedgedb
