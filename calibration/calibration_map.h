// A calibration map: a monotone map from a raw score to P(same label), with
// the base rate it is calibrated for and the report of its fit
// (docs/calibration.md). Internal to the core library.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "calibration/metrics.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace calibration {

// Fitted maps, simplest first (the order breaks ties when choosing).
enum class Method : uint8_t {
  kPlatt = 1,     // logistic on the transformed score: 2 parameters
  kBeta = 2,      // logistic on [ln s, -ln(1 - s)] (probability scores only): 3
  kIsotonic = 3,  // pool-adjacent-violators: one knot per block
};
const char* MethodName(Method method);  // "platt", "beta", "isotonic"

// mc and match are probabilities in [0, 1]; the other scores are unbounded
// reals (higher is better).
bool IsProbabilityScore(ScoreType score);
// Probability scores are read clipped to [kProbabilityClip, 1 - kProbabilityClip]:
// a float cannot tell 1 - 6e-8 from 1, and logit 1 is infinite.
constexpr double kProbabilityClip = 1e-7;
// The feature the Platt and isotonic maps see: logit of the clipped score for
// probability scores, the score itself (clamped to +-1e300) otherwise.
// Monotone non-decreasing. NaN stays NaN.
double TransformScore(ScoreType score_type, double score);

// Held-out measurement of one candidate method (cross-fitted, pooled over
// both halves; on the pairs' own base rate).
struct CandidateReport {
  Method method = Method::kPlatt;
  double ece = 0;
  double brier = 0;
  double log_loss = 0;
};

// How a map was chosen.
struct FitReport {
  Method chosen = Method::kPlatt;
  // Every method tried, simplest first.
  std::vector<CandidateReport> candidates;
  // The raw score read as a probability, on the same pairs (mc and match
  // only): the "before" of a before/after report.
  bool has_raw = false;
  double raw_ece = std::numeric_limits<double>::quiet_NaN();
  double raw_brier = std::numeric_limits<double>::quiet_NaN();
  double raw_log_loss = std::numeric_limits<double>::quiet_NaN();
  // Seed of the split into halves.
  uint64_t split_seed = 0;
  // One sentence for the user: which method won and why.
  std::string reason;
};

// Plain data: the fitters fill it, Validate() says whether it is usable,
// Decode() only returns maps that pass Validate().
struct CalibrationMap {
  Method method = Method::kPlatt;
  // The (resolved) score type the map reads; never kDefault.
  ScoreType score_type = ScoreType::kMc;
  // Platt: {slope, intercept} on TransformScore(s), slope >= 0.
  // Beta: {a, b, c}: logit p = a ln s - b ln(1 - s) + c, a >= 0, b >= 0.
  // Isotonic: empty.
  std::vector<double> params;
  // Isotonic only: knot i maps TransformScore(s) = knot_score[i] (strictly
  // increasing) to knot_prob[i] (non-decreasing, in [0, 1]); linear between
  // knots, constant beyond the first and last.
  std::vector<double> knot_score;
  std::vector<double> knot_prob;
  // Positive rate of the pairs the map was fitted on (pi0) and of the
  // population it is calibrated for (pi). Apply adds the prior shift
  // logit(pi) - logit(pi0) to the fitted log-odds.
  double fit_base_rate = 0.5;
  double base_rate = 0.5;
  // Labelled pairs the map was fitted on.
  int64_t num_pairs = 0;
  // Monte Carlo samples per side of the fitted scores (0: not Monte Carlo),
  // and the collection sequence number when fitted (0: fitted elsewhere).
  int32_t samples = 0;
  uint64_t sequence = 0;
  FitReport report;

  // P(same label | score) in the population of base_rate: monotone
  // non-decreasing in score, in [0, 1]. A NaN score (no information) gets
  // base_rate. Requires a map that Validate() accepts.
  double Apply(double score) const;
  // Re-targets the map to a population with another positive rate, in (0, 1).
  Status SetBaseRate(double pi);

  // InvalidArgument naming the first problem, or OK.
  Status Validate() const;
  // What CollectionStats shows of it.
  CalibrationInfo Info() const;
  // Versioned, checksummed, little-endian (docs/calibration.md, "Format").
  std::string Encode() const;
  // Rejects anything Encode() of a valid map could not have produced with
  // Status::Corruption; *map is only written on success.
  static Status Decode(const std::string& bytes, CalibrationMap* map);
};

// Encoding version written by Encode().
constexpr uint16_t kCalibrationMapVersion = 1;

}  // namespace calibration
}  // namespace hedgedb
