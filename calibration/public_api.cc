// The exported entry points of hedgedb/calibration.h that need no database.
#include "calibration/fit.h"
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

}  // namespace hedgedb
