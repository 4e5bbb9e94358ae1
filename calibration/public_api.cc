// The exported entry points of hedgedb/calibration.h that need no database.
#include <cmath>

#include "calibration/fit.h"
#include "calibration/report.h"
#include "hedgedb/calibration.h"

namespace hedgedb {

Status FitCalibrationMap(ScoreType score_type, const double* scores, const uint8_t* same_label,
                         int64_t n, double base_rate, std::string* map_bytes,
                         CalibrationInfo* info) {
  if (n < 0 || (n > 0 && (!scores || !same_label))) {
    return Status::InvalidArgument("FitCalibrationMap: scores and labels of n pairs are needed");
  }
  if (score_type == ScoreType::kDefault) {
    return Status::InvalidArgument("FitCalibrationMap: give the resolved score type");
  }
  std::vector<calibration::ScoredPair> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pairs[size_t(i)] = {scores[i], same_label[i] != 0};
  calibration::FitOptions options;
  options.score_type = score_type;
  options.target_base_rate = base_rate;
  calibration::CalibrationMap map;
  HEDGEDB_RETURN_IF_ERROR(calibration::FitCalibration(pairs, options, &map));
  if (map_bytes) *map_bytes = map.Encode();
  if (info) *info = map.Info();
  return Status::OK();
}

Status CalibrateScoreMatrix(ScoreType score_type, const float* scores, int64_t n_queries,
                            int64_t n_items, const int64_t* query_labels,
                            const int64_t* item_labels, const int64_t* self_index,
                            const float* query_eta, uint64_t split_seed, std::string* map_bytes,
                            CalibrationReport* report) {
  if (n_queries < 1 || n_items < 1 || !scores || !query_labels || !item_labels || !report) {
    return Status::InvalidArgument(
        "CalibrateScoreMatrix: scores, labels and a report of at least one query and item are "
        "needed");
  }
  if (score_type == ScoreType::kDefault) {
    return Status::InvalidArgument("CalibrateScoreMatrix: give the resolved score type");
  }
  std::vector<calibration::QueryPairs> queries(static_cast<size_t>(n_queries));
  for (int64_t q = 0; q < n_queries; ++q) {
    calibration::QueryPairs& qp = queries[size_t(q)];
    const float* row = scores + q * n_items;
    for (int64_t j = 0; j < n_items; ++j) {
      if (self_index && self_index[q] == j) continue;
      if (!std::isfinite(row[j])) {
        return Status::InvalidArgument("score of query " + std::to_string(q) + " and item " +
                                       std::to_string(j) + " is not finite");
      }
      const bool match = query_labels[q] == item_labels[j];
      qp.pairs.push_back({double(row[j]), match});
      if (!qp.has_top || row[j] > qp.top_score) {
        qp.has_top = true;
        qp.top_score = row[j];
        qp.top_correct = match;
      }
    }
    if (query_eta) qp.eta = query_eta[q];
  }
  calibration::CalibrationMap map;
  HEDGEDB_RETURN_IF_ERROR(calibration::FitAndReport(score_type, split_seed, queries, &map, report));
  if (map_bytes) *map_bytes = map.Encode();
  return Status::OK();
}

}  // namespace hedgedb
