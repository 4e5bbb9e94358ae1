// Fitting calibration maps from labelled pairs, and choosing the method by
// held-out measurement (docs/calibration.md, "Methods"). Internal to the core
// library.
#pragma once

#include <cstdint>
#include <vector>

#include "calibration/calibration_map.h"
#include "calibration/metrics.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace calibration {

struct FitOptions {
  // The score the pairs carry (resolved: not kDefault). mc and match are
  // probabilities; the others unbounded.
  ScoreType score_type = ScoreType::kMc;
  // Positive rate of the population the map is for (pi), when the pairs were
  // subsampled or balanced and their own rate (pi0) differs: the map adds
  // logit(pi) - logit(pi0). 0: the pairs' own rate, no shift. Else in (0, 1).
  double target_base_rate = 0;
  // Fewest pairs, and fewest of each class, a fit accepts: below that the
  // held-out comparison and the isotonic blocks are noise.
  int64_t min_pairs = 200;
  int64_t min_pairs_per_class = 20;
  // Seed of FitCalibration's stratified split into two halves.
  uint64_t split_seed = 0;
  // FitCalibration: held-out log losses within tie_tolerance (nats per pair)
  // plus tie_z standard errors of their paired difference count as a tie,
  // which the simpler method wins.
  double tie_tolerance = 1e-4;
  double tie_z = 2.0;
  // Isotonic: each block's rate is shrunk towards the pairs' base rate by
  // this many pseudo-pairs, so no block claims exactly 0 or 1.
  double isotonic_prior_pairs = 1.0;
  // FitCalibration tries the conditional map when the pairs carry their
  // context; false: the score alone (the maps of version 1).
  bool allow_conditional = true;
  // Conditional map: L2 penalty on its standardized weights (in units of
  // one pair's log loss: negligible with many pairs, a mild pull towards the
  // unconditional map with few; 30 keeps the head's eta terms, fitted on a
  // few thousand best-ranked pairs, from following noise in the tail of eta).
  double conditional_ridge = 30.0;
  // Conditional map: hinges in the query's eta at its quartiles
  // (kFeatureQueryEtaKnot), for an eta effect that is not a line in logit
  // eta. false: the eta terms of map version 2 only.
  bool conditional_eta_knots = true;
  // Conditional map: at most about this many pairs are fitted (the deep
  // non-matches are subsampled and weighted; fit.cc, ConditionalUnchecked).
  int64_t conditional_max_pairs = 200000;
  // Bins of the reported ECE.
  int ece_bins = kEceBins;
};

// Logistic regression on TransformScore(s) (logit for probabilities),
// slope constrained to >= 0.
Status FitPlatt(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                CalibrationMap* map);
// Beta calibration (Kull et al. 2017): logistic on [ln s, -ln(1 - s)], a
// coefficient that comes out negative is dropped and the rest refitted.
// Probability scores only.
Status FitBeta(const std::vector<ScoredPair>& pairs, const FitOptions& options,
               CalibrationMap* map);
// Isotonic regression by pool-adjacent-violators on TransformScore(s); one
// knot per block at its mean transformed score.
Status FitIsotonic(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                   CalibrationMap* map);

// The conditional map (Method::kConditional): logistic on the score and the
// pair's context with interactions, monotone in score and gap. Needs every
// pair's rank (HasContext).
Status FitConditional(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                      CalibrationMap* map);
// Every pair carries its rank, so the conditional map applies.
bool HasContext(const std::vector<ScoredPair>& pairs);

// Cross-fits every applicable method (the conditional one when the pairs
// carry their context; fit on one half, predict the other, both ways; halves
// split by query when every pair names one), keeps the lowest held-out log loss (ties: the
// simplest), refits it on all pairs and fills map->report with every candidate's held-out ECE,
// Brier score and log loss.
Status FitCalibration(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                      CalibrationMap* map);

// The checks every fitter runs first (InvalidArgument naming the problem):
// a resolved score type, a valid target base rate, pairs present, every score
// finite (and in [0, 1] for probability scores), both classes present, at
// least min_pairs pairs and min_pairs_per_class of each class.
Status ValidatePairs(const std::vector<ScoredPair>& pairs, const FitOptions& options);

}  // namespace calibration
}  // namespace hedgedb
