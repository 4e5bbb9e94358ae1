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

// The labelled pairs of one query, and its best match.
struct QueryPairs {
  std::vector<ScoredPair> pairs;
  double top_score = 0;
  bool top_correct = false;
  bool has_top = false;
  float eta = std::numeric_limits<float>::quiet_NaN();  // of the query
};

// Fills *map (the fit on every pair) and *report (before / after, top
// matches; report->info from the map). Errors (the pairs cannot be fitted)
// leave *map unchanged.
Status FitAndReport(ScoreType score, uint64_t split_seed, const std::vector<QueryPairs>& queries,
                    CalibrationMap* map, CalibrationReport* report);

}  // namespace calibration
}  // namespace hedgedb
