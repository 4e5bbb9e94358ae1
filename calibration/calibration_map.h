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
  // Logistic on the score and the result's context (rank, gap to the next
  // score, query and item eta) with interactions: P(same label | score,
  // context). Fitted only on pairs that carry their context.
  kConditional = 4,
};
const char* MethodName(Method method);  // "platt", "beta", "isotonic", "conditional"

// The conditional map's inputs, read from a score and its PairContext
// (ConditionalInputs). Each is clamped to the range seen in the fit, so the
// map never extrapolates a line beyond its data; an unknown one takes the
// fit's mean.
enum ConditionalInput : int {
  kInputScore = 0,  // t = TransformScore(score)
  kInputGap,        // t - TransformScore(next score): the margin over the next candidate
  kInputLogRank,    // ln(rank), rank 1-based
  kInputQueryEta,   // logit(query eta), eta clipped to [1e-6, 1 - 1e-6]
  kInputItemEta,    // logit(item eta), likewise
  kNumConditionalInputs
};
// Its design features, built from the clamped inputs (bit f of
// CalibrationMap::features says feature f is used). Ranks fall into buckets
// 1, 2-3, 4-10, 11-30, 31-100 and beyond (the reference): each bucket but the
// last has its own intercept and score slope, so the map can say that the
// best match is likelier right than a deeper item of the same score, for
// every k. "top1" is 1 for rank 1.
constexpr int kRankBuckets = 5;  // buckets with their own terms
constexpr int kRankBucketLast[kRankBuckets] = {1, 3, 10, 30, 100};
enum ConditionalFeature : int {
  kFeatureScore = 0,          // t
  kFeatureGap,                // gap
  kFeatureLogRank,            // ln rank
  kFeatureGapTop1,            // gap x top1
  kFeatureQueryEta,           // logit eta_q
  kFeatureScoreQueryEta,      // t x logit eta_q
  kFeatureQueryEtaTop1,       // logit eta_q x top1
  kFeatureItemEta,            // logit eta_i
  kFeatureScoreItemEta,       // t x logit eta_i
  kFeatureQueryEtaHead,       // logit eta_q x head (head: rank <= 10)
  kFeatureScoreQueryEtaHead,  // t x logit eta_q x head
  kFeatureItemEtaHead,        // logit eta_i x head
  kFeatureScoreItemEtaHead,   // t x logit eta_i x head
  kFeatureRankBucket,         // kRankBuckets indicators: [rank in bucket b]
  kFeatureScoreRankBucket = kFeatureRankBucket + kRankBuckets,  // t x [rank in bucket b]
  // kEtaKnots hinges max(0, logit eta_q - knot_j) x head, knots at
  // quantiles of the fitted queries' eta (kEtaKnotQuantiles) (CalibrationMap::eta_knots): how
  // often the best matches are right falls steeply over the narrow bulk of
  // eta and flattens in its long tail, which one line in logit eta cannot
  // follow (the quickstart's top-1 precision by eta quartile: 0.67, 0.49,
  // 0.32, 0.22, over eta ranges of width 0.0007, 0.0014, 0.004 and 0.15).
  kFeatureQueryEtaKnot = kFeatureScoreRankBucket + kRankBuckets,
  kNumConditionalFeatures = kFeatureQueryEtaKnot + 3
};
// The knots sit at these quantiles of the fitted queries' eta.
constexpr int kEtaKnots = 3;
constexpr double kEtaKnotQuantiles[kEtaKnots] = {0.25, 0.5, 0.75};
// Buckets before this one are the head, where what eta says of a match
// differs most from the deep ranks (where nearly every pair is an easy
// non-match): the eta terms have their own head part.
constexpr int kHeadBuckets = 3;  // ranks 1-10
// The rank bucket of ln(rank) (kRankBuckets: beyond the last).
int RankBucket(double log_rank);
const char* ConditionalFeatureName(int feature);
// The inputs of one pair, before clamping: NaN where the context does not say.
void ConditionalInputs(ScoreType score_type, double score, const PairContext& context,
                       double inputs[kNumConditionalInputs]);
// Every design feature of (clamped, complete) inputs; `knots` are the
// query-eta knots (num_knots <= kEtaKnots; the hinges of missing knots are 0).
void ConditionalFeatures(const double inputs[kNumConditionalInputs], const double* knots,
                         int num_knots, double features[kNumConditionalFeatures]);

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
  // Conditional: one weight per used feature (on the standardized feature),
  // then the intercept.
  std::vector<double> params;
  // Isotonic only: knot i maps TransformScore(s) = knot_score[i] (strictly
  // increasing) to knot_prob[i] (non-decreasing, in [0, 1]); linear between
  // knots, constant beyond the first and last.
  std::vector<double> knot_score;
  std::vector<double> knot_prob;
  // Positive rate of the pairs the map was fitted on (pi0) and of the
  // population it is calibrated for (pi). Apply adds the prior shift
  // logit(pi) - logit(pi0) to the fitted log-odds.
  // Conditional only (empty / 0 otherwise): the used design features (bit
  // f: ConditionalFeature f), each input's fitted range [input_lo,
  // input_hi] and mean, and each used feature's standardization (mean and
  // scale, in feature order).
  uint32_t features = 0;
  std::vector<double> input_lo, input_hi, input_mean;
  std::vector<double> feature_mean, feature_scale;
  // Risk-controlled thresholds (format version 3; docs/calibration.md,
  // "False-match rate"): the held-out (conformal) queries' non-matching
  // pairs, counted by this map's probability in kFalseMatchBins equal bins of
  // [0, 1] (bin b: p in [b, b + 1) / kFalseMatchBins, p = 1 in the last).
  // Empty: none (fitted without a conformal fraction, or version 2).
  std::vector<double> false_match_counts;
  // Pairs of one query are not independent (an ambiguous query clears a
  // threshold with many of its non-matching items at once), so the bound
  // uses an effective number of pairs (Korn and Graubard 1998): with k_q(b)
  // the query's non-matching pairs in bin b or above and n_q all its
  // non-matching pairs, per bin the sums over the held-out queries of
  // k_q(b)^2 and k_q(b) n_q, and the sum of n_q^2 and the number of queries.
  std::vector<double> false_match_kk, false_match_kn;
  double false_match_nn = 0, false_match_queries = 0;
  // Conditional only (format version 3): the knots of the query-eta hinges
  // (kFeatureQueryEtaKnot), ascending, on the logit-eta input; at most
  // kEtaKnots. Empty in maps of version 2.
  std::vector<double> eta_knots;
  // Split-conformal scores (docs/calibration.md, "Conformal match sets"),
  // ascending: for each conformal query (labelled queries the map was not
  // fitted on), the highest probability this map gives one of its
  // same-label items as a search ranks them, or -1 when none was ranked.
  // Empty: the map has no conformal sets.
  std::vector<double> conformal_scores;
  // The eta of each conformal query, in the order of conformal_scores
  // (empty when the queries have none): group-conditional (Mondrian) sets
  // by quartile of query eta.
  std::vector<double> conformal_eta;
  double fit_base_rate = 0.5;
  double base_rate = 0.5;
  // Labelled pairs the map was fitted on.
  int64_t num_pairs = 0;
  // Monte Carlo samples per side of the fitted scores (0: not Monte Carlo),
  // and the collection sequence number when fitted (0: fitted elsewhere).
  int32_t samples = 0;
  uint64_t sequence = 0;
  FitReport report;

  // P(same label | score) in the population of base_rate, in [0, 1]; a
  // conditional map reads the context too (null, or a field unknown: its
  // fit's mean). Monotone non-decreasing in score (for a conditional map:
  // with the rest of the context held fixed). A NaN score (no information)
  // gets base_rate. Requires a map that Validate() accepts.
  double Apply(double score, const PairContext* context = nullptr) const;
  bool conditional() const { return method == Method::kConditional; }
  // The probability threshold of a match set with the given coverage in
  // (0, 1): the items of a query whose probability is at least it contain a
  // same-label item with probability >= coverage (over exchangeable
  // queries), the finite-sample split-conformal quantile: with n scores
  // s_(1) <= ... <= s_(n) and alpha = 1 - coverage, s_(j) for
  // j = floor(alpha (n + 1)). InvalidArgument without conformal scores, for
  // a coverage outside (0, 1), or when j < 1 (naming the fewest conformal
  // queries the coverage needs).
  Status ConformalThreshold(double coverage, double* threshold) const;
  // The same within the query's quartile of eta (the quartiles of the
  // conformal queries' eta): the quantile of the conformal queries of that
  // quartile only, so coverage holds within each quartile (Mondrian
  // conformal). Needs conformal_eta and a finite query eta.
  Status ConformalThresholdByEta(double coverage, double query_eta, double* threshold) const;
  // The smallest probability threshold (a bin edge b / kFalseMatchBins)
  // whose false-match rate, the share of non-matching pairs with p >= it,
  // is at most max_rate with the given confidence: the one-sided
  // Clopper-Pearson upper bound of that share over the held-out non-matching
  // pairs is <= max_rate, computed on the effective sample (Korn and
  // Graubard): the pairs and the count divided by the design effect, the
  // between-query variance of the share over its binomial variance (at
  // least 1), rounded to the safe side. The counts fall as the threshold
  // rises, so the smallest passing threshold fails with probability at
  // most about 1 - confidence, without a correction for the choice. InvalidArgument for a
  // rate or confidence outside (0, 1), without counts, or when even a
  // threshold that no held-out pair clears cannot be bounded (naming the
  // fewest non-matching pairs it needs).
  Status FalseMatchThreshold(double max_rate, double confidence, double* threshold) const;
  // Whether Apply reads the query's / the items' eta (a search computes them
  // for it).
  bool ReadsQueryEta() const;
  bool ReadsItemEta() const;
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

// Whether a conditional map's log-odds are non-decreasing in the score
// (*score_ok) and in the gap (*gap_ok) everywhere in its clamped input range,
// with the rest of the context fixed. Validate() requires both.
void ConditionalSlopes(const CalibrationMap& map, bool* score_ok, bool* gap_ok);

// Bins of CalibrationMap::false_match_counts: thresholds in steps of 0.001.
constexpr int kFalseMatchBins = 1000;
// The one-sided Clopper-Pearson upper confidence bound on a binomial rate
// after k successes in n trials (0 <= k <= n, n >= 1): the rate p with
// P(X <= k | n, p) = 1 - confidence (1 when k == n).
double ClopperPearsonUpper(int64_t k, int64_t n, double confidence);

// The slope of a conditional map's log-odds in logit eta_q for a head
// result (rank <= 10), on segment s of the eta knots (0: below the first
// knot, s: from knot s - 1 on), without the score x eta interaction. The fit
// keeps every segment's slope <= 0 (a more uncertain query is not promised
// more), and Apply continues the last one beyond the fit's most uncertain
// query.
double HeadEtaSlope(const CalibrationMap& map, int segment);

// Encoding version written by Encode(). Version 1 (no conditional section)
// still decodes: such maps are unconditional; version 2 has no eta knots.
constexpr uint16_t kCalibrationMapVersion = 3;

}  // namespace calibration
}  // namespace hedgedb
