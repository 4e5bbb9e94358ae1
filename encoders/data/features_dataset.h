// Precomputed features with labels: the input of the MLP head (the
// F-statistic paper's CUB protocol trains on fixed 2048-d backbone features).
//
// Two .npy files: features (N x F, float32 or float64; stored as float32) and
// labels (N, or N x 1, any integer dtype, or float with integral values).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

struct FeaturesDataset {
  int64_t count = 0;
  int64_t dim = 0;
  std::vector<float> features;  // count x dim, row-major
  std::vector<int64_t> labels;  // count

  const float* row(int64_t i) const { return features.data() + i * dim; }
};

// Checks (errors name the file): features are 2-D with F >= 1 and N >= 1,
// float-typed and finite (the first non-finite value is reported by row and
// column); labels are integral, 1-D or N x 1, non-negative, one per feature row.
Status LoadFeaturesDataset(const std::string& features_path, const std::string& labels_path,
                           FeaturesDataset* dataset);

// The rows whose label lies in [min_label, max_label], in their original
// order. Class-range splits like CUB-200's (classes 1-100 train, 101-200 test).
FeaturesDataset SelectLabelRange(const FeaturesDataset& dataset, int64_t min_label,
                                 int64_t max_label);

}  // namespace encoders
}  // namespace hedgedb
