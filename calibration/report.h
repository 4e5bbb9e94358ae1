// From labelled pairs grouped by query to a stored map and its report: the
// map is fitted on every pair, and its quality is measured held out by query
// (two folds: the map of one half of the queries predicts the other half).
// Shared by DB::Calibrate and CalibrateScoreMatrix (hedgedb/calibration.h).
// Internal to the core library.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "calibration/calibration_map.h"
#include "calibration/metrics.h"
#include "hedgedb/calibration.h"

namespace hedgedb {
namespace calibration {

// The labelled pairs of one query (with their context: rank, next score,
// item eta, the query's eta), and its best match.
struct QueryPairs {
  std::vector<ScoredPair> pairs;
  double top_score = 0;
  PairContext top_context;
  bool top_correct = false;
  bool has_top = false;
  float eta = std::numeric_limits<float>::quiet_NaN();  // of the query
};

// Fills *map (the fit on every pair) and *report (before / after, top
// matches; report->info from the map). Errors (the pairs cannot be fitted)
// leave *map unchanged.
// allow_conditional: whether the conditional map is a candidate.
// conformal_fraction in [0, 1): that fraction of the queries (seeded by
// split_seed) is kept out of the fit; the map's probabilities of their
// same-label items become map->conformal_scores.
Status FitAndReport(ScoreType score, uint64_t split_seed, bool allow_conditional,
                    double conformal_fraction, const std::vector<QueryPairs>& queries,
                    CalibrationMap* map, CalibrationReport* report);

// How a stored map does on other labelled queries (for example corrupted
// ones, after a fit on clean ones): every pair's probability with its
// context, measured as FitAndReport measures "after". InvalidArgument when
// there are no pairs.
Status MeasureMap(const CalibrationMap& map, const std::vector<QueryPairs>& queries,
                  CalibrationQuality* quality);

// The pairs of one query, sorted best first (as its search ranks them), get
// their rank and the next pair's score; the best becomes the query's top
// match. Then only the best `keep` stay (0: all).
void RankQueryPairs(QueryPairs* query, int64_t keep);

}  // namespace calibration
}  // namespace hedgedb
