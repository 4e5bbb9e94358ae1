// The collection's calibration maps: fitting one on the collection's labelled
// pairs, storing, importing and removing them (docs/calibration.md).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <shared_mutex>
#include <type_traits>
#include <unordered_set>

#include "calibration/report.h"
#include "common/random.h"
#include "hedgedb/match_parameters.h"
#include "query/collection.h"
#include "query/match_fit.h"

namespace hedgedb {
namespace query {
namespace {

// A pair score of -inf (a codes query giving one of the item's symbols
// log-probability 0) is a valid score that ranks below every finite one;
// the fit, which works on finite numbers, counts it as the lowest finite
// score among the pairs (the map then gives -inf that score's probability
// or less: Apply is monotone and clamps it). Every pair -inf: nothing to fit.
Status FloorMinusInfinity(std::vector<calibration::QueryPairs>* queries) {
  double lowest = std::numeric_limits<double>::infinity();
  bool any = false;
  for (const auto& q : *queries) {
    for (const auto& p : q.pairs) {
      if (std::isfinite(p.score)) lowest = std::min(lowest, p.score);
      any = any || p.score == -std::numeric_limits<double>::infinity();
    }
  }
  if (!any) return Status::OK();
  if (!std::isfinite(lowest)) {
    return Status::InvalidArgument(
        "every pair's score is -inf (each query gives the items' symbols log-probability 0): "
        "nothing to calibrate on");
  }
  const auto floor = [lowest](auto* score) {
    if (*score == -std::numeric_limits<std::decay_t<decltype(*score)>>::infinity()) {
      *score = static_cast<std::decay_t<decltype(*score)>>(lowest);
    }
  };
  for (auto& q : *queries) {
    for (auto& p : q.pairs) {
      floor(&p.score);
      floor(&p.context.next_score);  // the conditional map's gap reads it
    }
    if (q.has_top) {
      floor(&q.top_score);
      floor(&q.top_context.next_score);
    }
  }
  return Status::OK();
}

}  // namespace

Status Collection::LoadCalibrationsLocked() {
  std::vector<std::pair<uint8_t, std::string>> stored;
  HEDGEDB_RETURN_IF_ERROR(store_->LoadCalibrations(meta_, &stored));
  calibrations_.clear();
  calibration_note_.clear();
  for (const auto& kv : stored) {
    calibration::CalibrationMap map;
    Status s = calibration::CalibrationMap::Decode(kv.second, &map);
    if (s.ok() && uint8_t(map.score_type) != kv.first) {
      s = Status::Corruption("calibration map is stored under another score type");
    }
    if (!s.ok()) {
      // The records are intact: the collection opens, this score has no map
      // (prob is NaN) until it is refitted.
      calibration_note_ += std::string(calibration_note_.empty() ? "" : "; ") +
                           "a stored calibration is damaged and not used (refit it with " +
                           "calibrate): " + s.ToString();
      continue;
    }
    calibrations_[map.score_type] = std::move(map);
  }
  return Status::OK();
}

Status Collection::Calibrate(const CalibrateOptions& o, CalibrationReport* report_out) {
  // Writes wait: the map records the sequence it was fitted at.
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::NotFound("collection '" + meta_.spec.name + "' was dropped");
  const CollectionSpec& s = meta_.spec;
  const RowShape shape = RowShapeOf(s);
  ScoreParams params;
  HEDGEDB_RETURN_IF_ERROR(ScoreParamsFor(s, o.score, o.samples, o.has_seed, o.seed, &params));
  if (o.max_pairs < 1) return Status::InvalidArgument("max-pairs must be >= 1");
  if (o.top_ranks < 0) return Status::InvalidArgument("top-ranks must be >= 0");
  if (!(o.conformal_fraction >= 0 && o.conformal_fraction < 1)) {
    return Status::InvalidArgument("conformal fraction must be in [0, 1), got " +
                                   std::to_string(o.conformal_fraction));
  }
  // Match parameters to fit (CalibrateOptions::match_parameters).
  using MatchParameters = CalibrateOptions::MatchParameters;
  const bool has_ab = s.kind == Kind::kGaussian || s.kind == Kind::kMog;
  if (o.match_parameters == MatchParameters::kFit && !has_ab) {
    return Status::InvalidArgument("collection '" + s.name + "' holds " + KindName(s.kind) +
                                   ", which have no match parameters to fit (gaussian and mog "
                                   "collections have them)");
  }
  bool fit_ab = has_ab && (o.match_parameters == MatchParameters::kFit ||
                           (o.match_parameters == MatchParameters::kAuto &&
                            !MatchParametersNote(s, o.score, true).empty()));
  std::string not_fitted;  // why auto kept them
  const bool held_out = o.queries.n > 0;
  const size_t qfloats = QueryRowSize(s);
  std::vector<float> held_rows;
  if (held_out) {
    HEDGEDB_RETURN_IF_ERROR(ValidateQueries(o.queries));
    if (!o.query_labels) return Status::InvalidArgument("held-out queries need labels");
    held_rows.resize(size_t(o.queries.n) * qfloats);
    for (int64_t q = 0; q < o.queries.n; ++q) {
      PackQueryRow(o.queries, q, held_rows.data() + q * qfloats);
    }
  } else if (s.kind == Kind::kCodes) {
    return Status::InvalidArgument(
        "codes collections are queried with log-probability tables, which stored codes are "
        "not: calibrate them with labelled held-out query tables");
  }

  CalibrationReport report;
  std::vector<calibration::QueryPairs> per_query;
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    const uint8_t* const arena = table_.arena().data();
    const std::vector<int64_t>& row_ids = table_.ids();
    const std::vector<int64_t>& row_labels = table_.labels();
    std::vector<int64_t> labelled;
    std::unordered_set<int64_t> labels;
    for (int64_t r : table_.live_rows()) {
      if (!table_.has_label(r)) continue;
      labelled.push_back(r);
      labels.insert(row_labels[size_t(r)]);
    }
    if (labelled.size() < 2) {
      return Status::InvalidArgument("collection '" + s.name + "' has " +
                                     std::to_string(labelled.size()) +
                                     " labelled items: calibration needs labelled items of at "
                                     "least two labels (ingest with labels)");
    }
    if (labels.size() < 2 && !held_out) {
      return Status::InvalidArgument("every labelled item of collection '" + s.name +
                                     "' has the same label: calibration needs at least two");
    }
    MatchFit fit;
    if (fit_ab) {
      // Fitted first: every score and eta below reads them. They are kept
      // as floats, as the spec stores them, so the map is fitted at exactly
      // the values that searches will use.
      // Float rows (a compact row format widened).
      std::vector<float> widened(labelled.size() * shape.item_row_size());
      WidenRows(shape, arena, row_bytes_, labelled.data(), labelled.size(), widened.data());
      std::vector<const float*> rows;
      std::vector<int64_t> row_label;
      for (size_t i = 0; i < labelled.size(); ++i) {
        rows.push_back(widened.data() + i * shape.item_row_size());
        row_label.push_back(row_labels[size_t(labelled[i])]);
      }
      MatchPairs pairs;
      Status st = DrawMatchPairs(s, rows, row_label, o.sample_seed, &pairs);
      if (st.ok()) st = FitMatchParameters(pairs, &fit);
      if (!st.ok() && o.match_parameters == MatchParameters::kAuto) {
        fit_ab = false;
        not_fitted = "match_a and match_b were kept: " + st.message();
      } else if (!st.ok()) {
        return Status::InvalidArgument("cannot fit the match parameters of collection '" + s.name +
                                       "' (match_parameters keep leaves them): " + st.message());
      }
    }
    if (fit_ab) {
      params.match_a = float(fit.match_a);
      params.match_b = float(fit.match_b);
      if (!(params.match_a > 0) || !std::isfinite(params.match_a) ||
          !std::isfinite(params.match_b)) {
        return Status::InvalidArgument("cannot fit the match parameters of collection '" + s.name +
                                       "': they leave float's range");
      }
    }
    // The queries: the held-out set, or a seeded sample of the labelled
    // items, each paired with every other labelled item.
    int64_t per_query_pairs = int64_t(labelled.size()) - (held_out ? 0 : 1);
    if (o.top_ranks > 0) per_query_pairs = std::min(per_query_pairs, o.top_ranks);
    const int64_t available = held_out ? o.queries.n : int64_t(labelled.size());
    const int64_t nq =
        std::max<int64_t>(1, std::min<int64_t>(available, o.max_pairs / per_query_pairs));
    std::vector<int64_t> order(static_cast<size_t>(available));
    std::iota(order.begin(), order.end(), 0);
    uint64_t state = StreamSeed(o.sample_seed, 0xCA11B);
    for (int64_t i = available - 1; i > 0; --i) {  // Fisher-Yates
      std::swap(order[size_t(i)], order[size_t(SplitMix64(&state) % uint64_t(i + 1))]);
    }
    order.resize(size_t(nq));
    per_query.resize(size_t(nq));
    std::vector<Status> errors(static_cast<size_t>(nq));
    const bool with_eta = s.kind == Kind::kGaussian || s.kind == Kind::kMog;
    // Every labelled item's eta, once: a conditional map reads it (as a
    // search computes it for its hits).
    std::vector<float> item_eta;
    if (with_eta) {
      item_eta.resize(labelled.size());
      UncertaintyRows(shape, params, arena, row_bytes_, labelled.data(), labelled.size(),
                      item_eta.data());
    }
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < nq; ++i) {
      std::vector<float> own(qfloats);
      const float* qrow = nullptr;
      int64_t self = -1, qlabel = 0;
      if (held_out) {
        qrow = held_rows.data() + order[size_t(i)] * qfloats;
        qlabel = o.query_labels[order[size_t(i)]];
      } else {
        // Items of float kinds are their own query rows (same layout).
        self = labelled[size_t(order[size_t(i)])];
        WidenItemRow(shape, arena + self * row_bytes_, own.data());
        qrow = own.data();
        qlabel = row_labels[self];
      }
      std::unique_ptr<PreparedQuery> prepared;
      errors[i] = PrepareQuery(shape, params, qrow, &prepared);
      if (!errors[i].ok()) continue;
      std::vector<float> scores(labelled.size());
      prepared->ScoreRows(arena, row_bytes_, labelled.data(), labelled.size(), scores.data());
      // The query's exact ranking, ordered as search orders it (ties of
      // float scores by PreparedQuery::TieBreakKeys), so that the ranks,
      // the gaps to the next score and the top-1 are those a search
      // returns.
      std::vector<double> keys;
      if (prepared->TieBreakKeys(arena, row_bytes_, nullptr, 0, nullptr)) {
        keys.resize(labelled.size());
        prepared->TieBreakKeys(arena, row_bytes_, labelled.data(), labelled.size(), keys.data());
      }
      const auto better = [&](size_t a, size_t b) {
        if (scores[a] != scores[b]) return scores[a] > scores[b];
        if (!keys.empty() && keys[a] != keys[b]) return keys[a] > keys[b];
        return row_ids[labelled[a]] < row_ids[labelled[b]];
      };
      std::vector<size_t> ranking;
      ranking.reserve(labelled.size());
      for (size_t j = 0; j < labelled.size(); ++j) {
        if (labelled[j] != self) ranking.push_back(j);
      }
      std::sort(ranking.begin(), ranking.end(), better);
      calibration::QueryPairs& qp = per_query[size_t(i)];
      // The query's eta as a search computes it (codes: its table's entropy).
      qp.eta = QueryUncertainty(shape, params, qrow);
      qp.pairs.reserve(ranking.size());
      for (size_t j : ranking) {
        calibration::ScoredPair pair{double(scores[j]), row_labels[labelled[j]] == qlabel};
        pair.context.query_eta = qp.eta;
        if (with_eta) pair.context.item_eta = item_eta[j];
        qp.pairs.push_back(pair);
      }
      calibration::RankQueryPairs(&qp, o.top_ranks);
    }
    for (const Status& e : errors) HEDGEDB_RETURN_IF_ERROR(e);
  }

  calibration::CalibrationMap map;
  Status fitted = FloorMinusInfinity(&per_query);
  if (fitted.ok()) {
    fitted = calibration::FitAndReport(params.score, o.sample_seed, !o.unconditional,
                                       o.conformal_fraction, per_query, &map, &report);
  }
  if (!fitted.ok()) {
    return Status::InvalidArgument("cannot calibrate collection '" + s.name +
                                   "': " + fitted.message());
  }
  map.samples = params.score == ScoreType::kMc ? params.samples : 0;
  map.sequence = meta_.sequence;
  report.info = map.Info();

  report.match_parameters_fitted = fit_ab;
  report.match_parameters_note = not_fitted;
  if (has_ab) {
    report.match_a_before = s.match_a;
    report.match_b_before = s.match_b;
    report.match_a = params.match_a;
    report.match_b = params.match_b;
  }

  if (!o.dry_run && fit_ab) {
    storage::CollectionMeta refitted = meta_;
    if (!refitted.refitted) {  // the index and arena files stay bound to these
      refitted.refitted = true;
      refitted.created_match_a = meta_.spec.match_a;
      refitted.created_match_b = meta_.spec.match_b;
    }
    refitted.spec.match_a = params.match_a;
    refitted.spec.match_b = params.match_b;
    HEDGEDB_RETURN_IF_ERROR(
        store_->ReplaceSpecAndCalibration(refitted, uint8_t(map.score_type), map.Encode()));
    std::unique_lock<RwMutex> lock(state_mutex_);
    meta_ = refitted;
    // The other maps read scores or eta of the old parameters: the store
    // dropped them in the same batch.
    calibrations_.clear();
    calibration_note_.clear();
    calibrations_[map.score_type] = std::move(map);
    report.stored = true;
  } else if (!o.dry_run) {
    HEDGEDB_RETURN_IF_ERROR(store_->PutCalibration(meta_, uint8_t(map.score_type), map.Encode()));
    std::unique_lock<RwMutex> lock(state_mutex_);
    calibrations_[map.score_type] = std::move(map);
    report.stored = true;
  }
  if (report_out) *report_out = std::move(report);
  return Status::OK();
}

Status Collection::ImportCalibration(const std::string& map_bytes, double base_rate) {
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::NotFound("collection '" + meta_.spec.name + "' was dropped");
  calibration::CalibrationMap map;
  HEDGEDB_RETURN_IF_ERROR(calibration::CalibrationMap::Decode(map_bytes, &map));
  if (base_rate != 0) HEDGEDB_RETURN_IF_ERROR(map.SetBaseRate(base_rate));
  // The map's score must be one the kind has under its own name.
  ScoreParams params;
  if (!ScoreParamsFor(meta_.spec, map.score_type, 0, false, 0, &params).ok() ||
      params.score != map.score_type) {
    return Status::InvalidArgument(std::string("the calibration is for score ") +
                                   ScoreName(map.score_type) + ", which " +
                                   KindName(meta_.spec.kind) + " collections do not have");
  }
  HEDGEDB_RETURN_IF_ERROR(store_->PutCalibration(meta_, uint8_t(map.score_type), map.Encode()));
  std::unique_lock<RwMutex> lock(state_mutex_);
  calibrations_[map.score_type] = std::move(map);
  return Status::OK();
}

Status Collection::RemoveCalibration(ScoreType score) {
  std::lock_guard<std::mutex> write_lock(write_mutex_);
  if (dropped_) return Status::NotFound("collection '" + meta_.spec.name + "' was dropped");
  const ScoreType resolved = ResolveScore(meta_.spec.kind, score);
  {
    std::shared_lock<RwMutex> lock(state_mutex_);
    if (!calibrations_.count(resolved) && calibration_note_.empty()) {
      return Status::NotFound(std::string("collection '") + meta_.spec.name +
                              "' has no calibration of score " + ScoreName(resolved));
    }
  }
  // Also clears a damaged map stored under this score.
  HEDGEDB_RETURN_IF_ERROR(store_->DeleteCalibration(meta_, uint8_t(resolved)));
  std::unique_lock<RwMutex> lock(state_mutex_);
  calibrations_.erase(resolved);
  return LoadCalibrationsLocked();
}

}  // namespace query
}  // namespace hedgedb
