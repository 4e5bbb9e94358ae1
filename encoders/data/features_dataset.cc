#include "encoders/data/features_dataset.h"

#include <cmath>

#include "hedgedb/npy.h"

namespace hedgedb {
namespace encoders {

Status LoadFeaturesDataset(const std::string& features_path, const std::string& labels_path,
                           FeaturesDataset* dataset) {
  NpyArray features;
  HEDGEDB_RETURN_IF_ERROR(ReadNpy(features_path, &features));
  if (features.shape.size() != 2 || features.shape[0] < 1 || features.shape[1] < 1) {
    return Status::InvalidArgument(features_path + ": features must be a non-empty N x F array, " +
                                   "got shape " + NpyShapeString(features.shape));
  }
  if (!features.is_float()) {
    return Status::InvalidArgument(features_path + ": features must be float32 or float64, got " +
                                   NpyDescr(features.type));
  }
  NpyArray labels;
  HEDGEDB_RETURN_IF_ERROR(ReadNpy(labels_path, &labels));
  const bool column = labels.shape.size() == 2 && labels.shape[1] == 1;
  if (labels.shape.size() != 1 && !column) {
    return Status::InvalidArgument(labels_path + ": labels must be a 1-D (N) or N x 1 array, " +
                                   "got shape " + NpyShapeString(labels.shape));
  }
  if (labels.shape[0] != features.shape[0]) {
    return Status::InvalidArgument(labels_path + " holds " + std::to_string(labels.shape[0]) +
                                   " labels but " + features_path + " holds " +
                                   std::to_string(features.shape[0]) + " feature rows");
  }

  FeaturesDataset out;
  out.count = features.shape[0];
  out.dim = features.shape[1];
  HEDGEDB_RETURN_IF_ERROR(NpyToFloat32(features, features_path, &out.features));
  HEDGEDB_RETURN_IF_ERROR(NpyToInt64(labels, labels_path, &out.labels));
  for (int64_t i = 0; i < out.count; ++i) {
    for (int64_t d = 0; d < out.dim; ++d) {
      // A float64 value beyond float32's range becomes inf here as well.
      if (!std::isfinite(out.features[i * out.dim + d])) {
        return Status::InvalidArgument(features_path + ": non-finite feature at row " +
                                       std::to_string(i) + ", column " + std::to_string(d));
      }
    }
  }
  for (int64_t i = 0; i < out.count; ++i) {
    if (out.labels[i] < 0) {
      return Status::InvalidArgument(labels_path + ": negative label " +
                                     std::to_string(out.labels[i]) + " at row " +
                                     std::to_string(i));
    }
  }
  *dataset = std::move(out);
  return Status::OK();
}

FeaturesDataset SelectLabelRange(const FeaturesDataset& dataset, int64_t min_label,
                                 int64_t max_label) {
  FeaturesDataset out;
  out.dim = dataset.dim;
  for (int64_t i = 0; i < dataset.count; ++i) {
    if (dataset.labels[i] < min_label || dataset.labels[i] > max_label) continue;
    out.features.insert(out.features.end(), dataset.row(i), dataset.row(i) + dataset.dim);
    out.labels.push_back(dataset.labels[i]);
    ++out.count;
  }
  return out;
}

}  // namespace encoders
}  // namespace hedgedb
