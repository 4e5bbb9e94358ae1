#include "calibration/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "calibration/fit.h"

namespace hedgedb {
namespace calibration {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void CopyBins(const CalibrationMetrics& m, CalibrationQuality* q) {
  q->ece = m.ece;
  q->brier = m.brier;
  q->log_loss = m.log_loss;
  q->bins.clear();
  for (const ReliabilityBin& b : m.bins) {
    q->bins.push_back({b.mean_prob, b.fraction_positive, b.count});
  }
}

// ECE of the predictions whose pair ranked at most max_rank in its query
// (NaN when ranks are unknown or none qualifies).
double EceUpToRank(const std::vector<ScoredPair>& predictions, int32_t max_rank) {
  std::vector<ScoredPair> top;
  for (const ScoredPair& p : predictions) {
    if (p.context.rank >= 1 && p.context.rank <= max_rank) top.push_back(p);
  }
  CalibrationMetrics m;
  if (top.empty() || !MeasureCalibration(top, &m).ok()) return kNaN;
  return m.ece;
}

// Precision@1 and the mean probability of the top matches, overall and per
// quartile of query eta.
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
  std::vector<bool> right(top.size());
  std::vector<double> by_eta(top.size()), by_prob(probs.begin(), probs.end());
  for (size_t i = 0; i < top.size(); ++i) {
    right[i] = top[i].correct;
    by_eta[i] = -double(top[i].query_uncertainty);  // NaN stays NaN
  }
  q->erc_area_eta = ErrorRejectArea(by_eta, right);
  q->erc_area_prob = ErrorRejectArea(by_prob, right);
  q->erc_area_oracle = OracleErrorRejectArea(right);

  std::vector<size_t> with_eta;
  for (size_t i = 0; i < top.size(); ++i) {
    if (std::isfinite(top[i].query_uncertainty)) with_eta.push_back(i);
  }
  const size_t n = with_eta.size();
  if (n < 4) return;
  std::stable_sort(with_eta.begin(), with_eta.end(), [&](size_t a, size_t b) {
    return top[a].query_uncertainty < top[b].query_uncertainty;
  });
  q->eta_quartiles.clear();
  q->worst_eta_gap = 0;
  for (size_t g = 0; g < 4; ++g) {
    const size_t begin = g * n / 4, end = (g + 1) * n / 4;
    EtaGroupQuality group;
    group.eta_lo = top[with_eta[begin]].query_uncertainty;
    group.eta_hi = top[with_eta[end - 1]].query_uncertainty;
    group.queries = int64_t(end - begin);
    double c = 0, p = 0;
    for (size_t k = begin; k < end; ++k) {
      c += top[with_eta[k]].correct ? 1 : 0;
      p += probs[with_eta[k]];
    }
    group.precision_at_1 = c / double(end - begin);
    group.mean_top1_prob = p / double(end - begin);
    std::vector<ScoredPair> answers;
    for (size_t k = begin; k < end; ++k) {
      const double prob = probs[with_eta[k]];
      if (prob >= 0 && prob <= 1) answers.push_back({prob, top[with_eta[k]].correct});
    }
    CalibrationMetrics m;
    if (answers.size() == end - begin && MeasureCalibration(answers, &m, 10).ok()) {
      for (const ReliabilityBin& b : m.bins) {
        group.top1_bins.push_back({b.mean_prob, b.fraction_positive, b.count});
      }
    }
    group.gap = group.mean_top1_prob - group.precision_at_1;
    if (std::isnan(group.gap)) {
      q->worst_eta_gap = kNaN;
    } else if (!std::isnan(q->worst_eta_gap)) {
      q->worst_eta_gap = std::max(q->worst_eta_gap, std::fabs(group.gap));
    }
    q->eta_quartiles.push_back(group);
  }
}

}  // namespace

void RankQueryPairs(QueryPairs* query, int64_t keep) {
  std::vector<ScoredPair>& pairs = query->pairs;
  for (size_t j = 0; j < pairs.size(); ++j) {
    pairs[j].context.rank = int32_t(std::min<size_t>(j + 1, size_t(INT32_MAX)));
    pairs[j].context.next_score =
        j + 1 < pairs.size() ? float(pairs[j + 1].score) : std::numeric_limits<float>::quiet_NaN();
  }
  if (!pairs.empty()) {
    query->has_top = true;
    query->top_score = pairs[0].score;
    query->top_correct = pairs[0].is_match;
    query->top_context = pairs[0].context;
  }
  if (keep > 0 && int64_t(pairs.size()) > keep) pairs.resize(size_t(keep));
}

namespace {

// The quality of predicted probabilities (each pair's score is its p, with
// its rank in the context) and of the queries' top matches with their
// probabilities: ECE of all pairs, of the top-1 and top-10, the top-1
// quality by eta quartile and the error-versus-reject areas.
Status QualityOf(const std::vector<ScoredPair>& predicted, const std::vector<TopMatch>& top,
                 const std::vector<double>& top_probs, CalibrationQuality* q) {
  CalibrationMetrics metrics;
  HEDGEDB_RETURN_IF_ERROR(MeasureCalibration(predicted, &metrics));
  CopyBins(metrics, q);
  q->ece_top1 = EceUpToRank(predicted, 1);
  q->ece_top10 = EceUpToRank(predicted, 10);
  TopOneQuality(top, top_probs, q);
  return Status::OK();
}

}  // namespace

Status MeasureMap(const CalibrationMap& map, const std::vector<QueryPairs>& queries,
                  CalibrationQuality* quality) {
  std::vector<ScoredPair> predicted;
  std::vector<TopMatch> top;
  std::vector<double> top_probs;
  for (const QueryPairs& qp : queries) {
    for (const ScoredPair& p : qp.pairs) {
      ScoredPair h = p;
      h.score = map.Apply(p.score, &p.context);
      predicted.push_back(h);
    }
    if (!qp.has_top) continue;
    TopMatch t;
    t.query_uncertainty = qp.eta;
    t.correct = qp.top_correct;
    top_probs.push_back(map.Apply(qp.top_score, &qp.top_context));
    t.prob = float(top_probs.back());
    top.push_back(t);
  }
  if (predicted.empty()) return Status::InvalidArgument("no labelled pairs to measure the map on");
  *quality = CalibrationQuality();
  return QualityOf(predicted, top, top_probs, quality);
}

Status FitAndReport(ScoreType score, uint64_t split_seed, bool allow_conditional,
                    double conformal_fraction, const std::vector<QueryPairs>& all_queries,
                    CalibrationMap* map, CalibrationReport* report) {
  *report = CalibrationReport();
  if (!(conformal_fraction >= 0 && conformal_fraction < 1)) {
    return Status::InvalidArgument("conformal fraction must be in [0, 1), got " +
                                   std::to_string(conformal_fraction));
  }
  // The conformal queries: a seeded sample, kept out of everything below.
  std::vector<size_t> order(all_queries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(split_seed ^ 0xC0F0A11ULL);
  std::shuffle(order.begin(), order.end(), rng);
  const size_t n_conformal = size_t(std::floor(conformal_fraction * double(order.size())));
  if (conformal_fraction > 0 && (n_conformal < 1 || n_conformal >= order.size())) {
    return Status::InvalidArgument("a conformal fraction of " + std::to_string(conformal_fraction) +
                                   " of " + std::to_string(order.size()) +
                                   " queries leaves no conformal or no fitting queries");
  }
  std::vector<QueryPairs> fit_queries;
  std::vector<const QueryPairs*> conformal;
  {
    std::vector<bool> is_conformal(order.size(), false);
    for (size_t k = 0; k < n_conformal; ++k) is_conformal[order[k]] = true;
    for (size_t i = 0; i < all_queries.size(); ++i) {
      if (is_conformal[i]) {
        conformal.push_back(&all_queries[i]);
      } else if (n_conformal > 0) {
        fit_queries.push_back(all_queries[i]);
      }
    }
  }
  const std::vector<QueryPairs>& per_query = n_conformal > 0 ? fit_queries : all_queries;
  // Fit on every pair: the stored map. Each pair names its query, so the
  // method choice is cross-fitted by query.
  std::vector<ScoredPair> pairs;
  for (size_t i = 0; i < per_query.size(); ++i) {
    for (ScoredPair p : per_query[i].pairs) {
      p.query = int32_t(i);
      pairs.push_back(p);
    }
  }
  FitOptions fit;
  fit.score_type = score;
  fit.split_seed = split_seed;
  fit.allow_conditional = allow_conditional;
  CalibrationMap fitted;
  Status s = FitCalibration(pairs, fit, &fitted);
  if (!s.ok()) {
    return Status::InvalidArgument("on " + std::to_string(pairs.size()) +
                                   " labelled pairs: " + s.message());
  }

  // Held out, by query: the map of one half of the queries predicts the
  // pairs and the top matches of the other half.
  const size_t nq = per_query.size();
  std::vector<ScoredPair> held;  // (probability, match, context)
  std::vector<double> top_prob(nq, kNaN);
  bool folds_ok = nq >= 2;
  for (int fold = 0; fold < 2 && folds_ok; ++fold) {
    std::vector<ScoredPair> train;
    for (size_t i = 0; i < nq; ++i) {
      if (int(i % 2) != fold) continue;
      for (ScoredPair p : per_query[i].pairs) {
        p.query = int32_t(i);
        train.push_back(p);
      }
    }
    CalibrationMap half;
    if (!FitCalibration(train, fit, &half).ok()) {
      folds_ok = false;
      break;
    }
    for (size_t i = 0; i < nq; ++i) {
      if (int(i % 2) == fold) continue;
      for (const ScoredPair& p : per_query[i].pairs) {
        ScoredPair h = p;
        h.score = half.Apply(p.score, &p.context);
        held.push_back(h);
      }
      if (per_query[i].has_top) {
        top_prob[i] = half.Apply(per_query[i].top_score, &per_query[i].top_context);
      }
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
  if (folds_ok) HEDGEDB_RETURN_IF_ERROR(QualityOf(held, top, held_top, &report->after));
  if (IsProbabilityScore(score)) {
    std::vector<ScoredPair> raw(pairs);
    for (auto& p : raw) p.score = std::min(1.0, std::max(0.0, p.score));
    for (double& p : raw_top) p = std::min(1.0, std::max(0.0, p));
    HEDGEDB_RETURN_IF_ERROR(QualityOf(raw, top, raw_top, &report->before));
  } else {
    // Not a probability: only precision@1 has a "before".
    std::vector<double> none(top.size(), kNaN);
    TopOneQuality(top, none, &report->before);
  }
  report->queries = int64_t(nq);
  for (const auto& p : pairs) report->positives += p.is_match ? 1 : 0;
  report->top_matches = std::move(top);

  // Conformal scores: with the stored map, as a search computes them;
  // ascending, each with its query's eta (when every one has one).
  // Their non-matching pairs, counted by probability, bound the
  // false-match rate of a threshold (CalibrationMap::FalseMatchThreshold).
  std::vector<std::pair<double, double>> scored;  // (score, eta)
  bool all_eta = !conformal.empty();
  if (!conformal.empty()) {
    fitted.false_match_counts.assign(size_t(kFalseMatchBins), 0);
    fitted.false_match_kk.assign(size_t(kFalseMatchBins), 0);
    fitted.false_match_kn.assign(size_t(kFalseMatchBins), 0);
    fitted.false_match_queries = double(conformal.size());
  }
  std::vector<double> mine(static_cast<size_t>(kFalseMatchBins));  // one query's counts
  for (const QueryPairs* qp : conformal) {
    double best = -1;
    std::fill(mine.begin(), mine.end(), 0.0);
    for (const ScoredPair& p : qp->pairs) {
      const double prob = fitted.Apply(p.score, &p.context);
      if (p.is_match) {
        best = std::max(best, prob);
      } else {
        const int bin = std::min(int(prob * kFalseMatchBins), kFalseMatchBins - 1);
        mine[size_t(std::max(bin, 0))] += 1;
      }
    }
    // Cumulative from the top: k_q(b), then n_q = k_q(0).
    double above = 0;
    for (int b = kFalseMatchBins - 1; b >= 0; --b) {
      fitted.false_match_counts[size_t(b)] += mine[size_t(b)];
      above += mine[size_t(b)];
      mine[size_t(b)] = above;
    }
    const double n_q = mine[0];
    for (size_t b = 0; b < mine.size(); ++b) {
      fitted.false_match_kk[b] += mine[b] * mine[b];
      fitted.false_match_kn[b] += mine[b] * n_q;
    }
    fitted.false_match_nn += n_q * n_q;
    scored.push_back({best, double(qp->eta)});
    all_eta = all_eta && std::isfinite(qp->eta);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& se : scored) {
    fitted.conformal_scores.push_back(se.first);
    if (all_eta) fitted.conformal_eta.push_back(se.second);
  }
  report->info = fitted.Info();
  *map = std::move(fitted);
  return Status::OK();
}

}  // namespace calibration
}  // namespace hedgedb
