#include "calibration/report.h"

#include <algorithm>
#include <limits>

#include "calibration/fit.h"

namespace hedgedb {
namespace calibration {
namespace {

void CopyBins(const CalibrationMetrics& m, CalibrationQuality* q) {
  q->ece = m.ece;
  q->brier = m.brier;
  q->log_loss = m.log_loss;
  q->bins.clear();
  for (const ReliabilityBin& b : m.bins) {
    q->bins.push_back({b.mean_prob, b.fraction_positive, b.count});
  }
}

// Precision@1 and the mean probability of the top matches.
void TopOneQuality(const std::vector<TopMatch>& top, const std::vector<double>& probs,
                   CalibrationQuality* q) {
  if (top.empty()) return;
  double correct = 0, prob = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    correct += top[i].correct ? 1 : 0;
    prob += probs[i];
  }
  q->precision_at_1 = correct / double(top.size());
  q->mean_top1_prob = prob / double(top.size());
}

}  // namespace

Status FitAndReport(ScoreType score, uint64_t split_seed, const std::vector<QueryPairs>& per_query,
                    CalibrationMap* map, CalibrationReport* report) {
  *report = CalibrationReport();
  // Fit on every pair: the stored map.
  std::vector<ScoredPair> pairs;
  for (const QueryPairs& qp : per_query)
    pairs.insert(pairs.end(), qp.pairs.begin(), qp.pairs.end());
  FitOptions fit;
  fit.score_type = score;
  fit.split_seed = split_seed;
  CalibrationMap fitted;
  Status s = FitCalibration(pairs, fit, &fitted);
  if (!s.ok()) {
    return Status::InvalidArgument("on " + std::to_string(pairs.size()) +
                                   " labelled pairs: " + s.message());
  }

  // Held out, by query: the map of one half of the queries predicts the
  // pairs and the top matches of the other half.
  const size_t nq = per_query.size();
  std::vector<ScoredPair> held;  // (probability, match)
  std::vector<double> top_prob(nq, std::numeric_limits<double>::quiet_NaN());
  bool folds_ok = nq >= 2;
  for (int fold = 0; fold < 2 && folds_ok; ++fold) {
    std::vector<ScoredPair> train;
    for (size_t i = 0; i < nq; ++i) {
      if (int(i % 2) == fold)
        train.insert(train.end(), per_query[i].pairs.begin(), per_query[i].pairs.end());
    }
    CalibrationMap half;
    if (!FitCalibration(train, fit, &half).ok()) {
      folds_ok = false;
      break;
    }
    for (size_t i = 0; i < nq; ++i) {
      if (int(i % 2) == fold) continue;
      for (const ScoredPair& p : per_query[i].pairs) {
        held.push_back({half.Apply(p.score), p.is_match});
      }
      if (per_query[i].has_top) top_prob[i] = half.Apply(per_query[i].top_score);
    }
  }
  std::vector<TopMatch> top;
  std::vector<double> raw_top, held_top;
  for (size_t i = 0; i < nq; ++i) {
    if (!per_query[i].has_top) continue;
    TopMatch t;
    t.query_uncertainty = per_query[i].eta;
    t.correct = per_query[i].top_correct;
    t.prob = float(top_prob[i]);
    top.push_back(t);
    raw_top.push_back(per_query[i].top_score);
    held_top.push_back(top_prob[i]);
  }
  if (folds_ok) {
    CalibrationMetrics after;
    HEDGEDB_RETURN_IF_ERROR(MeasureCalibration(held, &after));
    CopyBins(after, &report->after);
    TopOneQuality(top, held_top, &report->after);
  }
  if (IsProbabilityScore(score)) {
    std::vector<ScoredPair> raw(pairs);
    for (auto& p : raw) p.score = std::min(1.0, std::max(0.0, p.score));
    CalibrationMetrics before;
    HEDGEDB_RETURN_IF_ERROR(MeasureCalibration(raw, &before));
    CopyBins(before, &report->before);
    TopOneQuality(top, raw_top, &report->before);
  } else {
    // Not a probability: only precision@1 has a "before".
    std::vector<double> none(top.size(), std::numeric_limits<double>::quiet_NaN());
    TopOneQuality(top, none, &report->before);
  }
  report->info = fitted.Info();
  report->queries = int64_t(nq);
  for (const auto& p : pairs) report->positives += p.is_match ? 1 : 0;
  report->top_matches = std::move(top);

  *map = std::move(fitted);
  return Status::OK();
}

}  // namespace calibration
}  // namespace hedgedb
