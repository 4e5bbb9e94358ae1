// Calibration metrics of predicted probabilities against labels
// (docs/calibration.md, "Metrics"). Internal to the core library.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace calibration {

// What a search knows about a result besides its raw score; a conditional
// map (Method::kConditional) reads it, the other maps ignore it. A field left
// at its default is unknown (the map puts its training mean in its place).
// Floats keep a million pairs small; scores and eta are floats anyway.
struct PairContext {
  // 1-based position of the item in its query's ranking (best first), as the
  // search that returned it ranked its candidates; 0: unknown.
  int32_t rank = 0;
  // Raw score of the candidate ranked right after it (NaN: none or unknown).
  float next_score = std::numeric_limits<float>::quiet_NaN();
  // Uncertainty (eta) of the query and of the item; NaN: none.
  float query_eta = std::numeric_limits<float>::quiet_NaN();
  float item_eta = std::numeric_limits<float>::quiet_NaN();
};

// One labelled pair: a score (a raw score, or a probability when measuring)
// and whether the two items share a label, with the context a conditional
// map reads and the query it came from (-1: unknown), so that fits can be
// cross-fitted by query.
struct ScoredPair {
  ScoredPair() = default;
  ScoredPair(double score_in, bool is_match_in) : score(score_in), is_match(is_match_in) {}
  double score = 0;
  bool is_match = false;
  int32_t query = -1;
  PairContext context;
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

// The area under the error-versus-reject curve ("Probabilistic Embeddings
// Revisited", section 5): the queries are sorted by confidence, most
// confident first, and the error of the m most confident ones (the share of
// them answered wrongly) is averaged over m = 1..n. Rejecting the least
// confident first should leave fewer errors: a lower area is a better
// confidence. `confidence` and `correct` have one entry per query; ties in
// confidence count the group's mean correctness at every cut inside it (the
// expectation over random tie breaking), so a constant confidence gives the
// overall error. NaN for no queries or a NaN confidence.
double ErrorRejectArea(const std::vector<double>& confidence, const std::vector<bool>& correct);
// The same when the errors are rejected first (the best any confidence can
// do on these answers).
double OracleErrorRejectArea(const std::vector<bool>& correct);

}  // namespace calibration
}  // namespace hedgedb
