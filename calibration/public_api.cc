// The exported entry points of hedgedb/calibration.h that need no database.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "calibration/fit.h"
#include "calibration/metrics.h"
#include "calibration/report.h"
#include "hedgedb/calibration.h"
#include "hedgedb/error_reject.h"

namespace hedgedb {

ErrorRejectAreas MeasureErrorReject(const std::vector<double>& confidence,
                                    const std::vector<bool>& correct) {
  ErrorRejectAreas areas;
  if (confidence.size() != correct.size()) return areas;
  areas.area = calibration::ErrorRejectArea(confidence, correct);
  areas.oracle = calibration::OracleErrorRejectArea(correct);
  areas.chance = calibration::ErrorRejectArea(std::vector<double>(correct.size(), 0.0), correct);
  return areas;
}

Status FitCalibrationMap(ScoreType score_type, const double* scores, const uint8_t* same_label,
                         int64_t n, double base_rate, std::string* map_bytes,
                         CalibrationInfo* info) {
  CalibrationPairs pairs;
  pairs.scores = scores;
  pairs.same_label = same_label;
  pairs.n = n;
  return FitCalibrationMap(score_type, pairs, base_rate, map_bytes, info);
}

Status FitCalibrationMap(ScoreType score_type, const CalibrationPairs& in, double base_rate,
                         std::string* map_bytes, CalibrationInfo* info) {
  const int64_t n = in.n;
  if (n < 0 || (n > 0 && (!in.scores || !in.same_label))) {
    return Status::InvalidArgument("FitCalibrationMap: scores and labels of n pairs are needed");
  }
  if (score_type == ScoreType::kDefault) {
    return Status::InvalidArgument("FitCalibrationMap: give the resolved score type");
  }
  std::vector<calibration::ScoredPair> pairs(static_cast<size_t>(n));
  std::unordered_map<int64_t, int32_t> query_index;  // dense, for the split by query
  for (int64_t i = 0; i < n; ++i) {
    calibration::ScoredPair& p = pairs[size_t(i)];
    p.score = in.scores[i];
    p.is_match = in.same_label[i] != 0;
    if (in.query) {
      p.query = query_index.emplace(in.query[i], int32_t(query_index.size())).first->second;
    }
    if (in.rank) {
      if (in.rank[i] < 1) {
        return Status::InvalidArgument("rank of pair " + std::to_string(i) + " is " +
                                       std::to_string(in.rank[i]) + ": ranks start at 1");
      }
      p.context.rank = in.rank[i];
    }
    if (in.next_score) p.context.next_score = in.next_score[i];
    if (in.query_eta) p.context.query_eta = in.query_eta[i];
    if (in.item_eta) p.context.item_eta = in.item_eta[i];
  }
  calibration::FitOptions options;
  options.score_type = score_type;
  options.target_base_rate = base_rate;
  calibration::CalibrationMap map;
  HEDGEDB_RETURN_IF_ERROR(calibration::FitCalibration(pairs, options, &map));
  if (map_bytes) *map_bytes = map.Encode();
  if (info) *info = map.Info();
  return Status::OK();
}

namespace {

// Each query's labelled pairs from a score matrix, ranked as a search ranks
// them (self_index: an item to leave out per query, or null).
Status QueriesOfScoreMatrix(const float* scores, int64_t n_queries, int64_t n_items,
                            const int64_t* query_labels, const int64_t* item_labels,
                            const int64_t* self_index, const float* query_eta,
                            std::vector<calibration::QueryPairs>* out) {
  std::vector<calibration::QueryPairs>& queries = *out;
  queries.assign(static_cast<size_t>(n_queries), calibration::QueryPairs());
  for (int64_t q = 0; q < n_queries; ++q) {
    calibration::QueryPairs& qp = queries[size_t(q)];
    const float* row = scores + q * n_items;
    if (query_eta) qp.eta = query_eta[q];
    std::vector<int64_t> ranking;
    for (int64_t j = 0; j < n_items; ++j) {
      if (self_index && self_index[q] == j) continue;
      if (!std::isfinite(row[j])) {
        return Status::InvalidArgument("score of query " + std::to_string(q) + " and item " +
                                       std::to_string(j) + " is not finite");
      }
      ranking.push_back(j);
    }
    // Best first; equal scores by item index (the top-1 is the first best).
    std::stable_sort(ranking.begin(), ranking.end(),
                     [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t j : ranking) {
      calibration::ScoredPair pair{double(row[j]), query_labels[q] == item_labels[j]};
      pair.context.query_eta = qp.eta;
      qp.pairs.push_back(pair);
    }
    calibration::RankQueryPairs(&qp, 0);
  }
  return Status::OK();
}

}  // namespace

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
  std::vector<calibration::QueryPairs> queries;
  HEDGEDB_RETURN_IF_ERROR(QueriesOfScoreMatrix(scores, n_queries, n_items, query_labels,
                                               item_labels, self_index, query_eta, &queries));
  calibration::CalibrationMap map;
  HEDGEDB_RETURN_IF_ERROR(
      calibration::FitAndReport(score_type, split_seed, true, 0, queries, &map, report));
  if (map_bytes) *map_bytes = map.Encode();
  return Status::OK();
}

Status MeasureCalibrationScoreMatrix(const std::string& map_bytes, const float* scores,
                                     int64_t n_queries, int64_t n_items,
                                     const int64_t* query_labels, const int64_t* item_labels,
                                     const int64_t* self_index, const float* query_eta,
                                     CalibrationQuality* quality) {
  if (n_queries < 1 || n_items < 1 || !scores || !query_labels || !item_labels || !quality) {
    return Status::InvalidArgument(
        "MeasureCalibrationScoreMatrix: scores, labels and a quality of at least one query and "
        "item are needed");
  }
  calibration::CalibrationMap map;
  HEDGEDB_RETURN_IF_ERROR(calibration::CalibrationMap::Decode(map_bytes, &map));
  std::vector<calibration::QueryPairs> queries;
  HEDGEDB_RETURN_IF_ERROR(QueriesOfScoreMatrix(scores, n_queries, n_items, query_labels,
                                               item_labels, self_index, query_eta, &queries));
  return calibration::MeasureMap(map, queries, quality);
}

}  // namespace hedgedb
