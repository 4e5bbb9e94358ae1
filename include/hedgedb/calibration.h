// Calibrated match probabilities: what DB::Calibrate takes and reports, and
// fitting a calibration from labelled pairs outside a database (for example
// on an encoder's validation split). docs/calibration.md explains the maps.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {

// How DB::Calibrate gathers its labelled pairs.
struct CalibrateOptions {
  // The score to calibrate (kDefault: the kind's default score). Each score
  // type of a collection has its own map.
  ScoreType score = ScoreType::kDefault;
  // Monte Carlo samples per side and seed of the pair scores; 0 / !has_seed:
  // the collection's (searches with other samples get slightly different raw
  // scores; the map is fitted at these).
  int samples = 0;
  bool has_seed = false;
  uint64_t seed = 0;
  // Without held-out queries, labelled items of the collection are the
  // queries and each is paired with every other labelled item, so the pairs
  // have the collection's real base rate. At most this many pairs: items are
  // drawn as queries (seeded by `sample_seed`) until the next would exceed it.
  int64_t max_pairs = 1000000;
  uint64_t sample_seed = 0;
  // A labelled held-out set (same layout as search queries), each query paired
  // with every labelled item of the collection. `query_labels` has
  // queries.n entries. queries.n == 0: use the collection's own items.
  EmbeddingView queries;
  const int64_t* query_labels = nullptr;
  // Each query contributes its pairs with its best `top_ranks` items only (0:
  // with every item). Search results are the best-ranked pairs, and being
  // ranked first says more than the score alone (an item that beat every
  // other candidate is likelier a match than another pair of the same
  // score): fitting on the ranks a search returns calibrates what users see.
  int64_t top_ranks = 0;
  // Fit the score alone (platt, beta or isotonic), not the conditional map
  // that also reads each result's rank, gap and eta: the maps of version 1,
  // for comparison.
  bool unconditional = false;
  // Conformal match sets (SearchOptions::coverage): this fraction of the
  // queries, in [0, 1), is kept out of the fit, and the probabilities the
  // map gives their same-label items are stored with it (split conformal,
  // docs/calibration.md). 0: none.
  double conformal_fraction = 0;
  // Fit and report, but do not store the map.
  bool dry_run = false;
  // The match parameters of gaussian and mog collections (match_a, match_b:
  // the sigmoid(-a * ||z1 - z2|| + b) that the mc and match scores and eta
  // read). kAuto fits them to the labelled items when they cannot express a
  // match (match_b <= 0, as the defaults: MatchParametersNote), and keeps
  // them, saying why in the report, when the items cannot be fitted (no
  // label with two items); kFit always (an error when it cannot); kKeep
  // never. Fitted ones (docs/calibration.md, "Match parameters")
  // replace the spec's in the same atomic write as the new map, and every
  // other stored map of the collection is removed (those of mc, match and
  // every conditional map read scores or eta of the old ones; the few that
  // do not are removed too, to keep one rule). Points and codes have none to fit: kFit is an error.
  enum class MatchParameters { kAuto, kFit, kKeep };
  MatchParameters match_parameters = MatchParameters::kAuto;
};

// The names of CalibrateOptions::MatchParameters that the CLI
// (--match-parameters) and Python (match_parameters=) take.
inline bool ParseMatchParameters(const std::string& name, CalibrateOptions::MatchParameters* out) {
  using M = CalibrateOptions::MatchParameters;
  for (const auto& e : {std::make_pair("auto", M::kAuto), std::make_pair("fit", M::kFit),
                        std::make_pair("keep", M::kKeep)}) {
    if (name == e.first) {
      *out = e.second;
      return true;
    }
  }
  return false;
}

// One bin of a reliability curve (15 equal-mass bins).
struct CalibrationBin {
  double mean_prob = 0;          // mean predicted probability
  double fraction_positive = 0;  // fraction of pairs that share a label
  int64_t count = 0;
};

// The queries of one quartile of query uncertainty (eta), and how their
// best matches' probabilities compare with how often those are right.
struct EtaGroupQuality {
  double eta_lo = 0, eta_hi = 0;  // eta range of the group's queries
  int64_t queries = 0;
  double mean_top1_prob = std::numeric_limits<double>::quiet_NaN();
  double precision_at_1 = std::numeric_limits<double>::quiet_NaN();
  double gap = std::numeric_limits<double>::quiet_NaN();  // mean_top1_prob - precision_at_1
  // The reliability curve of the group's top-1 answers (10 equal-mass bins):
  // whether p holds at every level within the group, not only on average.
  std::vector<CalibrationBin> top1_bins;
};

// Calibration quality of one set of probabilities on labelled pairs.
struct CalibrationQuality {
  double ece = std::numeric_limits<double>::quiet_NaN();  // 15 equal-mass bins, all pairs
  // ECE of the pairs a search returns: each query's best item (top-1) and
  // best ten (top-10), ranked by raw score (NaN when ranks are unknown).
  double ece_top1 = std::numeric_limits<double>::quiet_NaN();
  double ece_top10 = std::numeric_limits<double>::quiet_NaN();
  double brier = std::numeric_limits<double>::quiet_NaN();
  double log_loss = std::numeric_limits<double>::quiet_NaN();
  // Over the queries: how often the best other item shares the query's
  // label, and the mean probability given to that best item. Calibrated,
  // the two agree.
  double precision_at_1 = std::numeric_limits<double>::quiet_NaN();
  double mean_top1_prob = std::numeric_limits<double>::quiet_NaN();
  std::vector<CalibrationBin> bins;
  // The queries cut into four equal groups by their eta (lowest first; empty
  // when the queries have no eta), and the largest |gap| among them.
  std::vector<EtaGroupQuality> eta_quartiles;
  double worst_eta_gap = std::numeric_limits<double>::quiet_NaN();
  // Abstention: the area under the error-versus-reject curve of the top-1
  // answers (queries sorted by confidence, the error of the most confident
  // m averaged over m; lower is better; docs/calibration.md, "Metrics"),
  // with the confidence 1 - eta (rejecting the most uncertain queries
  // first) and the top-1 probability; the oracle rejects the errors first,
  // and a confidence that says nothing scores the overall error,
  // 1 - precision_at_1. NaN when there is no such confidence.
  double erc_area_eta = std::numeric_limits<double>::quiet_NaN();
  double erc_area_prob = std::numeric_limits<double>::quiet_NaN();
  double erc_area_oracle = std::numeric_limits<double>::quiet_NaN();
};

// One query's best match, for uncertainty-vs-accuracy curves.
struct TopMatch {
  float query_uncertainty = std::numeric_limits<float>::quiet_NaN();  // eta of the query
  float prob = std::numeric_limits<float>::quiet_NaN();  // held-out calibrated probability
  bool correct = false;                                  // same label as the query
};

struct CalibrationReport {
  CalibrationInfo info;
  int64_t queries = 0;    // queries the pairs came from
  int64_t positives = 0;  // pairs that share a label
  // Held out: `after` is measured on pairs of queries the map being measured
  // was not fitted on (two folds by query), so it predicts how the stored map
  // does on new queries. `before` reads the raw score as a probability (mc
  // and match only; NaN otherwise).
  CalibrationQuality before;
  CalibrationQuality after;
  std::vector<TopMatch> top_matches;  // one per query
  bool stored = false;                // false with dry_run
  // The match parameters before the call and those the map was fitted with
  // (NaN: kinds without them), and whether they were fitted
  // (CalibrateOptions::match_parameters; with dry_run, fitted but not kept).
  bool match_parameters_fitted = false;
  double match_a_before = std::numeric_limits<double>::quiet_NaN();
  double match_b_before = std::numeric_limits<double>::quiet_NaN();
  double match_a = std::numeric_limits<double>::quiet_NaN();
  double match_b = std::numeric_limits<double>::quiet_NaN();
  // Why auto did not fit them although they cannot express a match (for
  // example no label with two items); "" otherwise.
  std::string match_parameters_note;
};

// Labelled scored pairs in, an encoded calibration map out (the bytes that
// DB::ImportCalibration takes and a model file may carry). score_type is the
// resolved type of the scores; scores must be finite (and in [0, 1] for mc
// and match); at least 200 pairs and 20 of each class. base_rate: the
// population rate the map is for, in (0, 1); 0 keeps the pairs' own rate.
HEDGEDB_EXPORT Status FitCalibrationMap(ScoreType score_type, const double* scores,
                                        const uint8_t* same_label, int64_t n, double base_rate,
                                        std::string* map_bytes, CalibrationInfo* info);

// Labelled pairs with what a search knows of each besides its score, for an
// uncertainty- and rank-conditional map (docs/calibration.md, "Conditional
// maps"). Arrays of n entries; scores and same_label are needed, the others
// may be null (unknown). Without ranks the map is unconditional.
struct CalibrationPairs {
  const double* scores = nullptr;
  const uint8_t* same_label = nullptr;
  int64_t n = 0;
  // The query each pair came from: the method is then chosen on halves split
  // by query (a query's pairs share its eta and its ranking).
  const int64_t* query = nullptr;
  // 1-based position of the item in its query's ranking by raw score (best
  // first), and the raw score of the candidate ranked right after it (NaN:
  // none), as a search ranks them.
  const int32_t* rank = nullptr;
  const float* next_score = nullptr;
  // Uncertainty (eta) of the query and of the item (NaN: none).
  const float* query_eta = nullptr;
  const float* item_eta = nullptr;
};

HEDGEDB_EXPORT Status FitCalibrationMap(ScoreType score_type, const CalibrationPairs& pairs,
                                        double base_rate, std::string* map_bytes,
                                        CalibrationInfo* info);

// A labelled score matrix in (queries x items, row-major, raw scores of
// `score_type`), the report of DB::Calibrate out, and the map it would store
// (map_bytes, may be null). Each query is paired with every item except
// self_index[q] (its own item, or -1; self_index may be null). query_eta
// (n_queries, may be null) fills TopMatch::query_uncertainty and is what a
// conditional map reads of the query; each query's ranking (ties by item
// index) gives the pairs their rank and gap. split_seed
// seeds the method choice. For evaluations outside a database.
HEDGEDB_EXPORT Status CalibrateScoreMatrix(ScoreType score_type, const float* scores,
                                           int64_t n_queries, int64_t n_items,
                                           const int64_t* query_labels, const int64_t* item_labels,
                                           const int64_t* self_index, const float* query_eta,
                                           uint64_t split_seed, std::string* map_bytes,
                                           CalibrationReport* report);

// How a map of CalibrateScoreMatrix (map_bytes) does on other labelled
// queries against the same items, laid out as there: the shift a map fitted
// on clean queries meets on corrupted ones (`hedgedb evaluate`'s
// "calibration_shift"). *quality is measured as CalibrationReport::after
// is, but every query is new to the map (no cross-fitting).
HEDGEDB_EXPORT Status MeasureCalibrationScoreMatrix(const std::string& map_bytes,
                                                    const float* scores, int64_t n_queries,
                                                    int64_t n_items, const int64_t* query_labels,
                                                    const int64_t* item_labels,
                                                    const int64_t* self_index,
                                                    const float* query_eta,
                                                    CalibrationQuality* quality);

}  // namespace hedgedb
