// Calibration metrics of predicted probabilities against labels
// (docs/calibration.md, "Metrics"). Internal to the core library.
#pragma once

#include <cstdint>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace calibration {

// One labelled pair: a score (a raw score, or a probability when measuring)
// and whether the two items share a label.
struct ScoredPair {
  double score = 0;
  bool is_match = false;
};

// Equal-mass bins of the expected calibration error.
constexpr int kEceBins = 15;
// Log loss reads predictions clipped to [kLogLossClip, 1 - kLogLossClip], so a
// single confident mistake costs at most -ln(kLogLossClip) ~ 16.1 nats.
constexpr double kLogLossClip = 1e-7;

// One bin of a reliability curve.
struct ReliabilityBin {
  double mean_prob = 0;          // mean predicted probability in the bin
  double fraction_positive = 0;  // fraction of matching pairs in the bin
  int64_t count = 0;             // pairs in the bin
};

struct CalibrationMetrics {
  int64_t count = 0;
  double positive_rate = 0;  // fraction of matching pairs
  double mean_prob = 0;      // mean predicted probability
  // Sum over equal-mass bins of |mean p - fraction positive| x bin share.
  double ece = 0;
  // Mean of (p - y)^2.
  double brier = 0;
  // Mean of -[y ln p + (1 - y) ln(1 - p)], p clipped (kLogLossClip).
  double log_loss = 0;
  // The reliability curve: the bins of the ECE, lowest probability first.
  std::vector<ReliabilityBin> bins;
};

// Measures predictions (ScoredPair::score is the predicted probability) against
// their labels. Pairs are sorted by probability and cut into num_bins bins of
// equal size (sizes differ by at most one; fewer bins when there are fewer
// pairs). Errors: no predictions, num_bins < 1, or a probability that is NaN
// or outside [0, 1].
Status MeasureCalibration(const std::vector<ScoredPair>& predictions, CalibrationMetrics* metrics,
                          int num_bins = kEceBins);

}  // namespace calibration
}  // namespace hedgedb
