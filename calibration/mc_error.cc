#include "calibration/mc_error.h"

#include <cmath>
#include <string>
#include <vector>

namespace hedgedb {
namespace calibration {

namespace {

double SampleVariance(const std::vector<double>& v, double mean) {
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return ss / double(v.size() - 1);
}

template <typename T>
Status Estimate(const T* terms, int rows, int cols, McEstimate* estimate) {
  if (terms == nullptr) return Status::InvalidArgument("no pair terms");
  if (rows < 2 || cols < 2) {
    return Status::InvalidArgument("a standard error needs at least 2 samples per side, got " +
                                   std::to_string(rows) + " x " + std::to_string(cols));
  }
  std::vector<double> row_mean(rows, 0), col_mean(cols, 0);
  double total = 0;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      const double f = double(terms[size_t(i) * cols + j]);
      if (!std::isfinite(f)) {
        return Status::InvalidArgument("pair term (" + std::to_string(i) + ", " +
                                       std::to_string(j) + ") is not finite");
      }
      row_mean[i] += f;
      col_mean[j] += f;
      total += f;
    }
  }
  for (double& g : row_mean) g /= cols;
  for (double& h : col_mean) h /= rows;
  const double p = total / (double(rows) * cols);
  const double var = SampleVariance(row_mean, p) / rows + SampleVariance(col_mean, p) / cols;
  estimate->p_hat = p;
  estimate->std_error = std::sqrt(var);
  return Status::OK();
}

}  // namespace

Status EstimateMcError(const double* terms, int rows, int cols, McEstimate* estimate) {
  return Estimate(terms, rows, cols, estimate);
}

Status EstimateMcError(const float* terms, int rows, int cols, McEstimate* estimate) {
  return Estimate(terms, rows, cols, estimate);
}

}  // namespace calibration
}  // namespace hedgedb
