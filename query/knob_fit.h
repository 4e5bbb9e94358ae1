// The fit of a collection's default search (IndexKeeper::Tune): the stage-1
// knob (IVF nprobe, HNSW efSearch) and the stage-1 candidate count that a
// search leaving them at their defaults uses, chosen for the final recall@k
// such a search returns, not for stage 1 alone.
//
// Truth: for up to kFitQueries of the collection's own live items as queries
// (evenly spread over the rows), the exact top-k (k = SearchOptions' default)
// by the collection's default score over every other live row (each query
// leaves itself out, as a query the collection does not hold), scored as an
// exhaustive search scores them (ScoreRowsShared). Stage 2 rescores exactly,
// so a search with knob p and c candidates returns the true top-k item
// exactly when stage 1's top-c holds it: its final recall@k is the fraction
// of the truth in the index's top-c (the query itself not counted) at p. The fit measures that over
// a ladder (WalkFitLadder: p doubling from 1 for IVF, from the first candidate count for HNSW; c
// doubling from k x 10 up to 16 times that) and picks the cheapest pair by a fixed cost model
// (DefaultSearchCost) whose recall reaches kTargetFinalRecall. A flat index (Flat, SQ, PQ: stage 1
// scans every coarse vector) has no knob: its fit is the candidate count alone, the fewest on the
// same ladder that reach the target, as its coarse order differs from the score's as an IVF's.
//
// Measured at 10M items (bench/RESULTS.md, "Ten million items, second
// measurement"): a fit of stage 1 alone (95% of the exact coarse top-100)
// chose nprobe 64 and 100 candidates, recall@10 0.900 at 4.4 ms, where
// nprobe 16 and 400 candidates gave 0.994 at 0.85 ms: the coarse order
// (means and total variance) and the score's order differ enough that the
// true top-10 lies a few hundred coarse neighbours deep.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"
#include "index/coarse_index.h"

namespace hedgedb {
namespace query {

// The final recall@k the default search is fitted to reach, on the fit's
// queries. Those are a sample: kFitQueries x 10 truth items put a standard
// error of about 0.0045 on an estimate near 0.99, so a fit at 0.99 holds
// 0.98 for the collection's queries at about two standard errors. (At 0.98
// the fit at 1M clustered items kept 100 candidates on an estimate of 0.988
// where fresh queries found 0.976; 200 find 1.0 for 8% more latency:
// bench/RESULTS.md, "The default search fitted to the final recall".) At
// 10M it asks for 400 candidates (0.994) or 800 (1.000), at a quarter of the
// latency the coarse fit chose (nprobe 64) for 0.890.
constexpr double kTargetFinalRecall = 0.99;
// Queries of the fit: the truth costs one exhaustive scoring of every live
// row per query (ScoreRowsShared reads each row once per batch), so 50 keep
// a 10M fit to a few exhaustive batches.
constexpr int64_t kFitQueries = 50;
// The widest candidate count the fit tries, as a multiple of k x 10.
constexpr int64_t kFitCandidateSteps = 16;

// One rung of the fit's ladder.
struct FitRung {
  index::CoarseSearchKnobs knobs;
  int64_t candidates = 0;
  double recall = 0;  // final recall@k estimate
  double cost = 0;    // DefaultSearchCost
};

// What FitDefaultSearch measured and chose.
struct SearchFit {
  bool fitted = false;  // false: the index fits no default search, or no rows
  index::CoarseSearchKnobs knobs;
  int64_t candidates = 0;  // at k = SearchOptions().k
  int oversampling = 0;    // candidates per result: ceil(candidates / k)
  double recall = std::numeric_limits<double>::quiet_NaN();  // at knobs and candidates
  // Stage 1's recall of the exact coarse top-(k x 10) at the chosen knobs
  // (CoarseIndex::MeasureRecall): the baseline the upkeep's checks compare.
  double coarse_recall = std::numeric_limits<double>::quiet_NaN();
  int64_t queries = 0;
  std::vector<FitRung> rungs;  // every pair measured, in order
  double seconds = 0;          // wall time of the fit
};

// The cost of a search with these knobs and candidates, in coarse vectors
// scanned (deterministic: the fit's choice does not depend on the machine's
// load). n items, `shape` the index's.
double DefaultSearchCost(const index::FactoryShape& shape, int64_t n,
                         const index::CoarseSearchKnobs& knobs, int64_t candidates);

// A rung's measurement: the final recall@k estimate of a search with
// `knobs` and `candidates` stage-1 candidates.
using RungRecall = std::function<Status(const index::CoarseSearchKnobs& knobs, int64_t candidates,
                                        double* recall)>;

// The fit's ladder, apart from its truth: walks the rungs of an index of
// `shape` holding n items whose static knobs (CoarseIndex::StaticKnobs) are
// `static_knobs`, measuring each with `recall_at`, and fills fit's rungs,
// fitted, knobs, candidates, oversampling and recall (the rest is
// FitDefaultSearch's). Not fitted where n < 2. A flat shape (no lists, no
// graph) has no knob: its ladder is one row along the candidates.
// For FitDefaultSearch, and for tests of the ladder on given recall curves.
Status WalkFitLadder(const index::FactoryShape& shape, int64_t n,
                     const index::CoarseSearchKnobs& static_knobs, const RungRecall& recall_at,
                     SearchFit* fit);

// Fits the default search of a collection of `spec` whose trained index
// holds `rows` (packed live item rows, ItemRowBytes(spec) apart) with ids
// `ids`. Reads the index only (its Search and MeasureRecall); the caller
// adopts the result (CoarseIndex::AdoptFit). Not fitted (OK) where the
// index fits no default search (CoarseIndex::fits_default_search) or is
// untrained, or there are no rows. A flat index's coarse_recall stays NaN.
Status FitDefaultSearch(const CollectionSpec& spec, const index::CoarseIndex& index,
                        const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids,
                        SearchFit* fit);

}  // namespace query
}  // namespace hedgedb
