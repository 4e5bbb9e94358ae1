#include "calibration/metrics.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hedgedb {
namespace calibration {

Status MeasureCalibration(const std::vector<ScoredPair>& predictions, CalibrationMetrics* metrics,
                          int num_bins) {
  if (predictions.empty()) return Status::InvalidArgument("no predictions to measure");
  if (num_bins < 1) {
    return Status::InvalidArgument("calibration metrics need at least one bin, got " +
                                   std::to_string(num_bins));
  }
  for (size_t i = 0; i < predictions.size(); ++i) {
    double p = predictions[i].score;
    if (!(p >= 0 && p <= 1)) {  // also catches NaN
      return Status::InvalidArgument("prediction " + std::to_string(i) + " is " +
                                     std::to_string(p) + ", not a probability in [0, 1]");
    }
  }
  std::vector<ScoredPair> sorted = predictions;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ScoredPair& a, const ScoredPair& b) { return a.score < b.score; });

  const int64_t n = int64_t(sorted.size());
  CalibrationMetrics m;
  m.count = n;
  double sum_p = 0, sum_y = 0, brier = 0, log_loss = 0;
  for (const ScoredPair& pair : sorted) {
    const double p = pair.score, y = pair.is_match ? 1.0 : 0.0;
    const double clipped = std::min(std::max(p, kLogLossClip), 1 - kLogLossClip);
    sum_p += p;
    sum_y += y;
    brier += (p - y) * (p - y);
    log_loss -= pair.is_match ? std::log(clipped) : std::log1p(-clipped);
  }
  m.mean_prob = sum_p / n;
  m.positive_rate = sum_y / n;
  m.brier = brier / n;
  m.log_loss = log_loss / n;

  const int64_t bins = std::min<int64_t>(num_bins, n);
  for (int64_t b = 0; b < bins; ++b) {
    const int64_t begin = b * n / bins, end = (b + 1) * n / bins;
    ReliabilityBin bin;
    double bin_p = 0, bin_y = 0;
    for (int64_t i = begin; i < end; ++i) {
      bin_p += sorted[i].score;
      bin_y += sorted[i].is_match ? 1 : 0;
    }
    bin.count = end - begin;
    bin.mean_prob = bin_p / bin.count;
    bin.fraction_positive = bin_y / bin.count;
    m.ece += std::fabs(bin.mean_prob - bin.fraction_positive) * double(bin.count) / n;
    m.bins.push_back(bin);
  }
  *metrics = std::move(m);
  return Status::OK();
}

double ErrorRejectArea(const std::vector<double>& confidence, const std::vector<bool>& correct) {
  const size_t n = confidence.size();
  if (n == 0 || correct.size() != n) return std::numeric_limits<double>::quiet_NaN();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(confidence[i])) return std::numeric_limits<double>::quiet_NaN();
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return confidence[a] > confidence[b]; });
  double area = 0, right_before = 0;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin;
    double right = 0;
    while (end < n && confidence[order[end]] == confidence[order[begin]]) {
      right += correct[order[end]] ? 1 : 0;
      ++end;
    }
    const double mean = right / double(end - begin);
    for (size_t m = begin + 1; m <= end; ++m) {
      const double kept_right = right_before + mean * double(m - begin);
      area += 1 - kept_right / double(m);
    }
    right_before += right;
    begin = end;
  }
  return area / double(n);
}

double OracleErrorRejectArea(const std::vector<bool>& correct) {
  std::vector<double> confidence(correct.size());
  for (size_t i = 0; i < correct.size(); ++i) confidence[i] = correct[i] ? 1 : 0;
  return ErrorRejectArea(confidence, correct);
}

}  // namespace calibration
}  // namespace hedgedb
