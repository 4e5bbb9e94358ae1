#include "calibration/calibration_map.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "calibration/logistic.h"
#include "common/coding.h"
#include "common/crc32c.h"

namespace hedgedb {
namespace calibration {

const char* MethodName(Method method) {
  switch (method) {
    case Method::kPlatt:
      return "platt";
    case Method::kBeta:
      return "beta";
    case Method::kIsotonic:
      return "isotonic";
    case Method::kConditional:
      return "conditional";
  }
  return "unknown";
}

const char* ConditionalFeatureName(int feature) {
  static const char* const kNames[kNumConditionalFeatures] = {"score",
                                                              "gap",
                                                              "log rank",
                                                              "gap x top1",
                                                              "query eta",
                                                              "score x query eta",
                                                              "query eta x top1",
                                                              "item eta",
                                                              "score x item eta",
                                                              "query eta x head",
                                                              "score x query eta x head",
                                                              "item eta x head",
                                                              "score x item eta x head",
                                                              "rank 1",
                                                              "rank 2-3",
                                                              "rank 4-10",
                                                              "rank 11-30",
                                                              "rank 31-100",
                                                              "score x rank 1",
                                                              "score x rank 2-3",
                                                              "score x rank 4-10",
                                                              "score x rank 11-30",
                                                              "score x rank 31-100",
                                                              "query eta knot 1 x head",
                                                              "query eta knot 2 x head",
                                                              "query eta knot 3 x head"};
  return feature >= 0 && feature < kNumConditionalFeatures ? kNames[feature] : "unknown";
}

int RankBucket(double log_rank) {
  for (int b = 0; b < kRankBuckets; ++b) {
    // Ranks are whole numbers: half a step above the bucket's last rank.
    if (log_rank < std::log(kRankBucketLast[b] + 0.5)) return b;
  }
  return kRankBuckets;
}

bool IsProbabilityScore(ScoreType score) {
  return score == ScoreType::kMc || score == ScoreType::kMatch;
}

namespace {

constexpr double kMaxUnboundedScore = 1e300;

double ClipProbability(double s) {
  return std::min(std::max(s, kProbabilityClip), 1 - kProbabilityClip);
}

bool IsMethod(uint8_t m) { return m >= 1 && m <= 4; }

constexpr double kEtaClip = 1e-6;

double EtaInput(float eta) {
  if (std::isnan(eta)) return std::numeric_limits<double>::quiet_NaN();
  return Logit(std::min(std::max(double(eta), kEtaClip), 1 - kEtaClip));
}

int PopCount(uint32_t v) {
  int n = 0;
  for (; v; v &= v - 1) ++n;
  return n;
}

constexpr uint32_t kAllFeatures = (1u << kNumConditionalFeatures) - 1;

// Score types a map can read: resolved ones only.
bool IsResolvedScore(uint8_t s) {
  return s >= uint8_t(ScoreType::kMc) && s <= uint8_t(ScoreType::kLogprob);
}

}  // namespace

double TransformScore(ScoreType score_type, double score) {
  if (std::isnan(score)) return score;
  if (IsProbabilityScore(score_type)) return Logit(ClipProbability(score));
  return std::min(std::max(score, -kMaxUnboundedScore), kMaxUnboundedScore);
}

void ConditionalInputs(ScoreType score_type, double score, const PairContext& context,
                       double inputs[kNumConditionalInputs]) {
  const double t = TransformScore(score_type, score);
  inputs[kInputScore] = t;
  inputs[kInputGap] = std::isnan(context.next_score)
                          ? std::numeric_limits<double>::quiet_NaN()
                          : t - TransformScore(score_type, double(context.next_score));
  inputs[kInputLogRank] =
      context.rank > 0 ? std::log(double(context.rank)) : std::numeric_limits<double>::quiet_NaN();
  inputs[kInputQueryEta] = EtaInput(context.query_eta);
  inputs[kInputItemEta] = EtaInput(context.item_eta);
}

void ConditionalFeatures(const double in[kNumConditionalInputs], const double* knots,
                         int num_knots, double f[kNumConditionalFeatures]) {
  const double t = in[kInputScore], gap = in[kInputGap], lr = in[kInputLogRank];
  const int bucket = RankBucket(lr);
  const double top1 = bucket == 0 ? 1 : 0, head = bucket < kHeadBuckets ? 1 : 0;
  const double q = in[kInputQueryEta], i = in[kInputItemEta];
  f[kFeatureQueryEtaHead] = q * head;
  f[kFeatureScoreQueryEtaHead] = t * q * head;
  f[kFeatureItemEtaHead] = i * head;
  f[kFeatureScoreItemEtaHead] = t * i * head;
  f[kFeatureScore] = t;
  f[kFeatureGap] = gap;
  f[kFeatureLogRank] = lr;
  f[kFeatureGapTop1] = gap * top1;
  f[kFeatureQueryEta] = in[kInputQueryEta];
  f[kFeatureScoreQueryEta] = t * in[kInputQueryEta];
  f[kFeatureQueryEtaTop1] = in[kInputQueryEta] * top1;
  f[kFeatureItemEta] = in[kInputItemEta];
  f[kFeatureScoreItemEta] = t * in[kInputItemEta];
  for (int b = 0; b < kRankBuckets; ++b) {
    f[kFeatureRankBucket + b] = bucket == b ? 1 : 0;
    f[kFeatureScoreRankBucket + b] = bucket == b ? t : 0;
  }
  for (int k = 0; k < kEtaKnots; ++k) {
    f[kFeatureQueryEtaKnot + k] = k < num_knots ? std::max(q - knots[k], 0.0) * head : 0;
  }
}

bool CalibrationMap::ReadsQueryEta() const {
  constexpr uint32_t kReads = (1u << kFeatureQueryEta) | (1u << kFeatureScoreQueryEta) |
                              (1u << kFeatureQueryEtaTop1) | (1u << kFeatureQueryEtaHead) |
                              (1u << kFeatureScoreQueryEtaHead) |
                              (((1u << kEtaKnots) - 1) << kFeatureQueryEtaKnot);
  return conditional() && (features & kReads) != 0;
}

bool CalibrationMap::ReadsItemEta() const {
  constexpr uint32_t kReads = (1u << kFeatureItemEta) | (1u << kFeatureScoreItemEta) |
                              (1u << kFeatureItemEtaHead) | (1u << kFeatureScoreItemEtaHead);
  return conditional() && (features & kReads) != 0;
}

namespace {

// The log-odds of a conditional map (before the prior shift).
double ConditionalLogOdds(const CalibrationMap& m, double score, const PairContext& context) {
  double in[kNumConditionalInputs];
  ConditionalInputs(m.score_type, score, context, in);
  // How far the query is more uncertain than any query of the fit.
  const double beyond = std::isnan(in[kInputQueryEta])
                            ? 0
                            : std::max(in[kInputQueryEta] - m.input_hi[kInputQueryEta], 0.0);
  for (int k = 0; k < kNumConditionalInputs; ++k) {
    if (std::isnan(in[k])) in[k] = m.input_mean[size_t(k)];
    in[k] = std::min(std::max(in[k], m.input_lo[size_t(k)]), m.input_hi[size_t(k)]);
  }
  double f[kNumConditionalFeatures];
  ConditionalFeatures(in, m.eta_knots.data(), int(m.eta_knots.size()), f);
  double z = m.params.back();
  size_t j = 0;
  for (int k = 0; k < kNumConditionalFeatures; ++k) {
    if (!(m.features >> k & 1)) continue;
    z += m.params[j] * (f[k] - m.feature_mean[j]) / m.feature_scale[j];
    ++j;
  }
  // Beyond the fit's most uncertain query, a head result's log-odds go on
  // falling at the last segment's slope, never rising: a query more
  // uncertain than every calibration query (an occluded image, say) is not
  // promised more than the most uncertain one seen. The slope leaves out
  // the score interaction, so the map stays monotone in the score. Deeper
  // ranks keep the clamped value.
  if (beyond > 0 && RankBucket(in[kInputLogRank]) < kHeadBuckets) {
    z += std::min(HeadEtaSlope(m, int(m.eta_knots.size())), 0.0) * beyond;
  }
  return z;
}

}  // namespace

double HeadEtaSlope(const CalibrationMap& m, int segment) {
  if (!m.conditional()) return 0;
  double slope = 0;
  size_t j = 0;
  for (int k = 0; k < kNumConditionalFeatures; ++k) {
    if (!(m.features >> k & 1)) continue;
    const bool knot = k >= kFeatureQueryEtaKnot && k < kFeatureQueryEtaKnot + segment;
    if (k == kFeatureQueryEtaHead || knot) slope += m.params[j] / m.feature_scale[j];
    ++j;
  }
  return slope;
}

void ConditionalSlopes(const CalibrationMap& m, bool* score_ok, bool* gap_ok) {
  // Weights on the unstandardized features (0 for unused ones).
  double w[kNumConditionalFeatures] = {};
  size_t j = 0;
  for (int k = 0; k < kNumConditionalFeatures; ++k) {
    if (m.features >> k & 1) {
      w[k] = m.params[j] / m.feature_scale[j];
      ++j;
    }
  }
  // The score's slope is linear in (eta_q, eta_i) within a rank bucket, and
  // the gap's depends on top1 only, so their minima over the clamped box lie
  // at a corner of some bucket.
  *score_ok = *gap_ok = true;
  for (int bucket = 0; bucket <= kRankBuckets; ++bucket) {
    for (int corner = 0; corner < 4; ++corner) {
      const double q = (corner & 1) ? m.input_hi[kInputQueryEta] : m.input_lo[kInputQueryEta];
      const double i = (corner & 2) ? m.input_hi[kInputItemEta] : m.input_lo[kInputItemEta];
      double d_score =
          w[kFeatureScore] + w[kFeatureScoreQueryEta] * q + w[kFeatureScoreItemEta] * i;
      if (bucket < kRankBuckets) d_score += w[kFeatureScoreRankBucket + bucket];
      if (bucket < kHeadBuckets) {
        d_score += w[kFeatureScoreQueryEtaHead] * q + w[kFeatureScoreItemEtaHead] * i;
      }
      const double d_gap = w[kFeatureGap] + (bucket == 0 ? w[kFeatureGapTop1] : 0);
      if (d_score < 0) *score_ok = false;
      if (d_gap < 0) *gap_ok = false;
    }
  }
}

double CalibrationMap::Apply(double score, const PairContext* context) const {
  if (std::isnan(score)) return base_rate;
  const double shift = Logit(base_rate) - Logit(fit_base_rate);
  double z = 0;
  switch (method) {
    case Method::kConditional:
      z = ConditionalLogOdds(*this, score, context ? *context : PairContext());
      break;
    case Method::kPlatt:
      z = params[0] * TransformScore(score_type, score) + params[1];
      break;
    case Method::kBeta: {
      const double s = ClipProbability(score);
      z = params[0] * std::log(s) - params[1] * std::log1p(-s) + params[2];
      break;
    }
    case Method::kIsotonic: {
      const double t = TransformScore(score_type, score);
      double p;
      if (t <= knot_score.front()) {
        p = knot_prob.front();
      } else if (t >= knot_score.back()) {
        p = knot_prob.back();
      } else {
        // First knot above t; t lies in [knot i-1, knot i).
        const size_t i =
            size_t(std::upper_bound(knot_score.begin(), knot_score.end(), t) - knot_score.begin());
        const double x0 = knot_score[i - 1], x1 = knot_score[i];
        const double y0 = knot_prob[i - 1], y1 = knot_prob[i];
        // Clamped so rounding cannot step outside [y0, y1] (monotonicity).
        p = std::min(std::max(y0 + (y1 - y0) * ((t - x0) / (x1 - x0)), y0), y1);
      }
      if (p <= 0 || p >= 1) return p;  // certain either way: no shift moves it
      z = Logit(p);
      break;
    }
  }
  return Sigmoid(z + shift);
}

static int64_t FewestConformalQueries(double alpha) {
  // The smallest n with floor(alpha (n + 1)) >= 1, with the 1e-9 of
  // ConformalThreshold (1 / alpha rounds either way).
  int64_t n = int64_t(std::ceil(1 / alpha)) + 1;
  while (n > 0 && std::floor(alpha * double(n) + 1e-9) >= 1) --n;
  return n;
}

namespace {

// The finite-sample split-conformal quantile of ascending scores.
Status ConformalQuantile(const std::vector<double>& ascending, double coverage, const char* what,
                         double* threshold) {
  if (!(coverage > 0 && coverage < 1)) {
    return Status::InvalidArgument("coverage must be in (0, 1), got " + std::to_string(coverage));
  }
  if (ascending.empty()) {
    return Status::InvalidArgument(
        "the calibration has no conformal scores: calibrate with a conformal fraction "
        "(conformal_fraction) first");
  }
  const double alpha = 1 - coverage;
  const int64_t n = int64_t(ascending.size());
  // 1e-9: alpha (n + 1) of a whole number must not round below it.
  const int64_t j = int64_t(std::floor(alpha * double(n + 1) + 1e-9));
  if (j < 1) {
    return Status::InvalidArgument("coverage " + std::to_string(coverage) + " needs at least " +
                                   std::to_string(FewestConformalQueries(alpha)) +
                                   " conformal queries" + what + ", the calibration has " +
                                   std::to_string(n));
  }
  *threshold = ascending[size_t(std::min(j, n) - 1)];
  return Status::OK();
}

}  // namespace

Status CalibrationMap::ConformalThreshold(double coverage, double* threshold) const {
  return ConformalQuantile(conformal_scores, coverage, "", threshold);
}

Status CalibrationMap::ConformalThresholdByEta(double coverage, double query_eta,
                                               double* threshold) const {
  if (!conformal_scores.empty() && conformal_eta.empty()) {
    return Status::InvalidArgument(
        "the conformal queries have no eta (points, codes): sets by eta need gaussian or mog");
  }
  if (!std::isfinite(query_eta)) {
    return Status::InvalidArgument("sets by eta need the query's eta");
  }
  // Quartile edges of the conformal queries' eta; the query's quartile.
  std::vector<double> sorted = conformal_eta;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  auto quartile = [&](double eta) {
    int q = 0;
    for (int k = 1; k < 4 && n > 0; ++k) {
      if (eta >= sorted[k * n / 4]) q = k;
    }
    return q;
  };
  const int mine = quartile(query_eta);
  std::vector<double> group;  // ascending, as conformal_scores
  for (size_t i = 0; i < conformal_scores.size(); ++i) {
    if (quartile(conformal_eta[i]) == mine) group.push_back(conformal_scores[i]);
  }
  const std::string what = " in quartile " + std::to_string(mine + 1) + " of eta";
  return ConformalQuantile(conformal_scores.empty() ? conformal_scores : group, coverage,
                           what.c_str(), threshold);
}

namespace {

// ln P(X <= k) for X ~ Binomial(n, p), 0 < p < 1, k < n: the terms from
// ln P(X = 0) up by the ratio of neighbours, summed in log space.
double LogBinomialCdf(int64_t k, int64_t n, double p) {
  const double odds = std::log(p) - std::log1p(-p);
  double t = double(n) * std::log1p(-p);  // ln P(X = 0)
  double best = t, sum = 1;              // sum of exp(term - best)
  for (int64_t i = 0; i < k; ++i) {
    t += std::log(double(n - i) / double(i + 1)) + odds;  // ln P(X = i + 1)
    if (t > best) {
      sum = sum * std::exp(best - t) + 1;
      best = t;
    } else {
      sum += std::exp(t - best);
    }
  }
  return best + std::log(sum);
}

}  // namespace

double ClopperPearsonUpper(int64_t k, int64_t n, double confidence) {
  if (k >= n) return 1;
  const double target = std::log1p(-confidence);  // ln(1 - confidence)
  // The CDF falls as p rises: bisect for CDF(p) = 1 - confidence.
  double lo = double(k) / double(n), hi = 1;
  for (int iter = 0; iter < 100 && hi - lo > 1e-13 * hi; ++iter) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= 0 || mid >= 1) break;
    if (LogBinomialCdf(k, n, mid) > target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

Status CalibrationMap::FalseMatchThreshold(double max_rate, double confidence,
                                           double* threshold) const {
  if (!(max_rate > 0 && max_rate < 1)) {
    return Status::InvalidArgument("max false-match rate must be in (0, 1), got " +
                                   std::to_string(max_rate));
  }
  if (!(confidence > 0 && confidence < 1)) {
    return Status::InvalidArgument("confidence must be in (0, 1), got " +
                                   std::to_string(confidence));
  }
  if (false_match_counts.empty()) {
    return Status::InvalidArgument(
        "the calibration has no held-out non-matching pairs: calibrate with a conformal "
        "fraction (conformal_fraction) first");
  }
  // above[b]: held-out non-matching pairs with p in bin b or higher.
  std::vector<int64_t> above(size_t(kFalseMatchBins) + 1, 0);
  for (int b = kFalseMatchBins - 1; b >= 0; --b) {
    above[size_t(b)] = above[size_t(b) + 1] + int64_t(false_match_counts[size_t(b)]);
  }
  const int64_t n = above[0];
  // Zero of n pairs above the threshold bounds the rate by
  // 1 - (1 - confidence)^(1/n): n must be at least ln(1 - c) / ln(1 - rate).
  const int64_t fewest =
      int64_t(std::ceil(std::log1p(-confidence) / std::log1p(-max_rate) - 1e-9));
  if (n < fewest) {
    return Status::InvalidArgument(
        "a false-match rate of " + std::to_string(max_rate) + " with confidence " +
        std::to_string(confidence) + " needs at least " + std::to_string(fewest) +
        " held-out non-matching pairs, the calibration has " + std::to_string(n));
  }
  // The bound falls as the threshold rises (fewer pairs above it): the
  // smallest passing bin by bisection.
  const bool clustered = false_match_kk.size() == size_t(kFalseMatchBins) &&
                         false_match_kn.size() == size_t(kFalseMatchBins) &&
                         false_match_queries >= 2;
  auto passes = [&](int b) {
    const int64_t k = above[size_t(b)];
    const double r = double(k) / double(n);
    if (r >= max_rate) return false;  // the bound is above the share itself
    double deff = 1;
    if (clustered && k > 0) {
      // Ratio estimator: sum over queries of (k_q - r n_q)^2, scaled to the
      // variance of k / n, against the binomial r (1 - r) / n.
      const double q = false_match_queries;
      const double ss = false_match_kk[size_t(b)] - 2 * r * false_match_kn[size_t(b)] +
                        r * r * false_match_nn;
      const double var = q / (q - 1) * std::max(ss, 0.0) / (double(n) * double(n));
      deff = std::max(1.0, var / (r * (1 - r) / double(n)));
    }
    // The effective sample, rounded so the bound only rises: fewer pairs,
    // more of them above the threshold.
    const int64_t n_eff = std::max<int64_t>(1, int64_t(std::floor(double(n) / deff)));
    const int64_t k_eff = std::min<int64_t>(n_eff, int64_t(std::ceil(r * double(n_eff) - 1e-9)));
    return ClopperPearsonUpper(k_eff, n_eff, confidence) <= max_rate;
  };
  int lo = 0, hi = kFalseMatchBins;  // hi passes: nothing above 1 (k = 0)
  if (passes(0)) {
    hi = 0;
  } else {
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (passes(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
  }
  // Bin kFalseMatchBins: every probability below 1, so p = 1 only.
  *threshold = double(hi) / kFalseMatchBins;
  return Status::OK();
}

Status CalibrationMap::SetBaseRate(double pi) {
  if (!(pi > 0 && pi < 1)) {
    return Status::InvalidArgument("base rate must be in (0, 1), got " + std::to_string(pi));
  }
  base_rate = pi;
  return Status::OK();
}

Status CalibrationMap::Validate() const {
  if (!IsMethod(uint8_t(method))) {
    return Status::InvalidArgument("unknown calibration method " + std::to_string(int(method)));
  }
  if (!IsResolvedScore(uint8_t(score_type))) {
    return Status::InvalidArgument("calibration map has no resolved score type");
  }
  if (method == Method::kBeta && !IsProbabilityScore(score_type)) {
    return Status::InvalidArgument(std::string("beta calibration needs a probability score, not ") +
                                   ScoreName(score_type));
  }
  if (!(fit_base_rate > 0 && fit_base_rate < 1) || !(base_rate > 0 && base_rate < 1)) {
    return Status::InvalidArgument("base rates must be in (0, 1)");
  }
  if (num_pairs < 0) return Status::InvalidArgument("negative number of pairs");
  if (samples < 0) return Status::InvalidArgument("negative number of samples");
  const int used = PopCount(features);
  const size_t want_params = method == Method::kPlatt         ? 2
                             : method == Method::kBeta        ? 3
                             : method == Method::kConditional ? size_t(used) + 1
                                                              : 0;
  if (params.size() != want_params) {
    return Status::InvalidArgument(std::string(MethodName(method)) + " map has " +
                                   std::to_string(params.size()) + " parameters, expected " +
                                   std::to_string(want_params));
  }
  for (double v : params) {
    if (!std::isfinite(v)) return Status::InvalidArgument("calibration parameter is not finite");
  }
  if (method == Method::kPlatt && params[0] < 0) {
    return Status::InvalidArgument("Platt slope is negative (the map would not be monotone)");
  }
  if (method == Method::kBeta && (params[0] < 0 || params[1] < 0)) {
    return Status::InvalidArgument(
        "beta coefficients are negative (the map would not be monotone)");
  }
  if (knot_score.size() != knot_prob.size()) {
    return Status::InvalidArgument("isotonic knots: score and probability counts differ");
  }
  if (method == Method::kIsotonic) {
    if (knot_score.empty()) return Status::InvalidArgument("isotonic map has no knots");
    for (size_t i = 0; i < knot_score.size(); ++i) {
      if (!std::isfinite(knot_score[i]) || !(knot_prob[i] >= 0 && knot_prob[i] <= 1)) {
        return Status::InvalidArgument("isotonic knot " + std::to_string(i) + " is out of range");
      }
      if (i > 0 && !(knot_score[i] > knot_score[i - 1] && knot_prob[i] >= knot_prob[i - 1])) {
        return Status::InvalidArgument("isotonic knots are not monotone at knot " +
                                       std::to_string(i));
      }
    }
  } else if (!knot_score.empty()) {
    return Status::InvalidArgument(std::string(MethodName(method)) + " map has isotonic knots");
  }
  if (method == Method::kConditional) {
    if ((features & ~kAllFeatures) != 0) {
      return Status::InvalidArgument("conditional map uses unknown features");
    }
    if (input_lo.size() != kNumConditionalInputs || input_hi.size() != kNumConditionalInputs ||
        input_mean.size() != kNumConditionalInputs || feature_mean.size() != size_t(used) ||
        feature_scale.size() != size_t(used)) {
      return Status::InvalidArgument("conditional map: inputs or standardization of wrong size");
    }
    for (int k = 0; k < kNumConditionalInputs; ++k) {
      if (!std::isfinite(input_lo[k]) || !std::isfinite(input_hi[k]) ||
          !(input_lo[k] <= input_mean[k] && input_mean[k] <= input_hi[k])) {
        return Status::InvalidArgument("conditional map: range of input " + std::to_string(k) +
                                       " is not finite or does not hold its mean");
      }
    }
    for (int j = 0; j < used; ++j) {
      if (!std::isfinite(feature_mean[j]) ||
          !(feature_scale[j] > 0 && std::isfinite(feature_scale[j]))) {
        return Status::InvalidArgument("conditional map: bad standardization of feature " +
                                       std::to_string(j));
      }
    }
    if (eta_knots.size() > size_t(kEtaKnots)) {
      return Status::InvalidArgument("conditional map has more than " +
                                     std::to_string(kEtaKnots) + " eta knots");
    }
    for (size_t k = 0; k < eta_knots.size(); ++k) {
      if (!std::isfinite(eta_knots[k]) || (k > 0 && !(eta_knots[k] > eta_knots[k - 1]))) {
        return Status::InvalidArgument("conditional map: eta knots are not finite and ascending");
      }
    }
    bool score_ok = true, gap_ok = true;
    ConditionalSlopes(*this, &score_ok, &gap_ok);
    if (!score_ok || !gap_ok) {
      return Status::InvalidArgument(std::string("conditional map decreases with the ") +
                                     (score_ok ? "gap" : "score") +
                                     " somewhere in its range (the map would not be monotone)");
    }
  } else if (features != 0 || !input_lo.empty() || !input_hi.empty() || !input_mean.empty() ||
             !feature_mean.empty() || !feature_scale.empty() || !eta_knots.empty()) {
    return Status::InvalidArgument(std::string(MethodName(method)) +
                                   " map has conditional features");
  }
  for (size_t i = 0; i < conformal_scores.size(); ++i) {
    const double c = conformal_scores[i];
    if (!(c == -1 || (c >= 0 && c <= 1)) || (i > 0 && c < conformal_scores[i - 1])) {
      return Status::InvalidArgument("conformal scores are not ascending in {-1} and [0, 1]");
    }
  }
  if (!false_match_counts.empty()) {
    if (false_match_counts.size() != size_t(kFalseMatchBins)) {
      return Status::InvalidArgument("false-match counts have " +
                                     std::to_string(false_match_counts.size()) + " bins, expected " +
                                     std::to_string(kFalseMatchBins));
    }
    for (double c : false_match_counts) {
      if (!(c >= 0 && c <= 9e15 && c == std::floor(c))) {
        return Status::InvalidArgument("false-match counts are not whole numbers >= 0");
      }
    }
  }
  if ((!false_match_kk.empty() || !false_match_kn.empty()) &&
      (false_match_kk.size() != size_t(kFalseMatchBins) ||
       false_match_kn.size() != size_t(kFalseMatchBins) || false_match_counts.empty())) {
    return Status::InvalidArgument("false-match moments do not match the counts");
  }
  for (const std::vector<double>* v : {&false_match_kk, &false_match_kn}) {
    for (double x : *v) {
      if (!(x >= 0 && std::isfinite(x))) {
        return Status::InvalidArgument("false-match moments are not finite and >= 0");
      }
    }
  }
  if (!(false_match_nn >= 0 && std::isfinite(false_match_nn)) ||
      !(false_match_queries >= 0 && false_match_queries == std::floor(false_match_queries) &&
        false_match_queries <= 9e15)) {
    return Status::InvalidArgument("false-match moments are not finite and >= 0");
  }
  if (!conformal_eta.empty() && conformal_eta.size() != conformal_scores.size()) {
    return Status::InvalidArgument("conformal eta and scores differ in number");
  }
  for (double e : conformal_eta) {
    if (!std::isfinite(e)) return Status::InvalidArgument("conformal eta is not finite");
  }
  if (!IsMethod(uint8_t(report.chosen))) {
    return Status::InvalidArgument("fit report names an unknown method");
  }
  for (const CandidateReport& c : report.candidates) {
    if (!IsMethod(uint8_t(c.method)) || !(c.ece >= 0 && c.ece <= 1) ||
        !(c.brier >= 0 && c.brier <= 1) || !(c.log_loss >= 0 && std::isfinite(c.log_loss))) {
      return Status::InvalidArgument("fit report has an invalid candidate");
    }
  }
  if (report.has_raw &&
      !(report.raw_ece >= 0 && report.raw_ece <= 1 && report.raw_brier >= 0 &&
        report.raw_brier <= 1 && report.raw_log_loss >= 0 && std::isfinite(report.raw_log_loss))) {
    return Status::InvalidArgument("fit report has invalid raw-score metrics");
  }
  return Status::OK();
}

// Layout, all little-endian:
//   u32 magic "HDCM", u16 version, u32 total size in bytes,
//   u8 method, u8 score type, f64 fit base rate, f64 base rate, i64 pairs,
//   u32 n, f64 params[n], u32 m, f64 knot_score[m], f64 knot_prob[m],
//   (version >= 2) u32 features, u32 i, f64 input_lo[i], f64 input_hi[i],
//           f64 input_mean[i], u32 f, f64 feature_mean[f], f64 feature_scale[f],
//           u32 c, f64 conformal_scores[c], u32 e, f64 conformal_eta[e],
//   (version >= 3) u32 k, f64 eta_knots[k], u32 b, f64 false_match_counts[b],
//           u32 m, f64 false_match_kk[m], f64 false_match_kn[m],
//           f64 false_match_nn, f64 false_match_queries,
//   report: u8 chosen, u64 split seed, u8 has_raw, f64 raw ece/brier/log loss,
//           u32 c, c x (u8 method, f64 ece, f64 brier, f64 log loss),
//           u32 length, reason bytes,
//   u32 CRC32C of every byte before it.
namespace {
constexpr uint32_t kMagic = 0x4D434448;  // "HDCM"
constexpr size_t kHeaderSize = 4 + 2 + 4;
}  // namespace

CalibrationInfo CalibrationMap::Info() const {
  CalibrationInfo info;
  info.score = score_type;
  info.method = MethodName(method);
  info.pairs = num_pairs;
  info.fit_base_rate = fit_base_rate;
  info.base_rate = base_rate;
  info.samples = samples;
  info.sequence = sequence;
  info.reason = report.reason;
  info.conditional = conditional();
  info.conformal_queries = int64_t(conformal_scores.size());
  for (double c : false_match_counts) info.held_out_non_matches += int64_t(c);
  for (int k = 0; k < kNumConditionalFeatures; ++k) {
    if (conditional() && (features >> k & 1)) {
      info.conditioned_on +=
          std::string(info.conditioned_on.empty() ? "" : ", ") + ConditionalFeatureName(k);
    }
  }
  return info;
}

std::string CalibrationMap::Encode() const {
  std::string out;
  PutFixed<uint32_t>(&out, kMagic);
  PutFixed<uint16_t>(&out, kCalibrationMapVersion);
  PutFixed<uint32_t>(&out, 0);  // total size, patched below
  PutFixed<uint8_t>(&out, uint8_t(method));
  PutFixed<uint8_t>(&out, uint8_t(score_type));
  PutFixed<double>(&out, fit_base_rate);
  PutFixed<double>(&out, base_rate);
  PutFixed<int64_t>(&out, num_pairs);
  PutFixed<int32_t>(&out, samples);
  PutFixed<uint64_t>(&out, sequence);
  PutFixed<uint32_t>(&out, uint32_t(params.size()));
  for (double v : params) PutFixed<double>(&out, v);
  PutFixed<uint32_t>(&out, uint32_t(knot_score.size()));
  for (double v : knot_score) PutFixed<double>(&out, v);
  for (double v : knot_prob) PutFixed<double>(&out, v);
  PutFixed<uint32_t>(&out, features);
  PutFixed<uint32_t>(&out, uint32_t(input_lo.size()));
  for (const std::vector<double>* v : {&input_lo, &input_hi, &input_mean}) {
    for (size_t k = 0; k < input_lo.size(); ++k)
      PutFixed<double>(&out, k < v->size() ? (*v)[k] : 0);
  }
  PutFixed<uint32_t>(&out, uint32_t(feature_mean.size()));
  for (const std::vector<double>* v : {&feature_mean, &feature_scale}) {
    for (size_t k = 0; k < feature_mean.size(); ++k)
      PutFixed<double>(&out, k < v->size() ? (*v)[k] : 0);
  }
  PutFixed<uint32_t>(&out, uint32_t(conformal_scores.size()));
  for (double v : conformal_scores) PutFixed<double>(&out, v);
  PutFixed<uint32_t>(&out, uint32_t(conformal_eta.size()));
  for (double v : conformal_eta) PutFixed<double>(&out, v);
  PutFixed<uint32_t>(&out, uint32_t(eta_knots.size()));
  for (double v : eta_knots) PutFixed<double>(&out, v);
  PutFixed<uint32_t>(&out, uint32_t(false_match_counts.size()));
  for (double v : false_match_counts) PutFixed<double>(&out, v);
  PutFixed<uint32_t>(&out, uint32_t(false_match_kk.size()));
  for (double v : false_match_kk) PutFixed<double>(&out, v);
  for (size_t b = 0; b < false_match_kk.size(); ++b)
    PutFixed<double>(&out, b < false_match_kn.size() ? false_match_kn[b] : 0);
  PutFixed<double>(&out, false_match_nn);
  PutFixed<double>(&out, false_match_queries);
  PutFixed<uint8_t>(&out, uint8_t(report.chosen));
  PutFixed<uint64_t>(&out, report.split_seed);
  PutFixed<uint8_t>(&out, report.has_raw ? 1 : 0);
  PutFixed<double>(&out, report.raw_ece);
  PutFixed<double>(&out, report.raw_brier);
  PutFixed<double>(&out, report.raw_log_loss);
  PutFixed<uint32_t>(&out, uint32_t(report.candidates.size()));
  for (const CandidateReport& c : report.candidates) {
    PutFixed<uint8_t>(&out, uint8_t(c.method));
    PutFixed<double>(&out, c.ece);
    PutFixed<double>(&out, c.brier);
    PutFixed<double>(&out, c.log_loss);
  }
  PutFixed<uint32_t>(&out, uint32_t(report.reason.size()));
  out += report.reason;
  std::string size;
  PutFixed<uint32_t>(&size, uint32_t(out.size() + 4));
  out.replace(6, 4, size);
  PutFixed<uint32_t>(&out, Crc32c(out.data(), out.size()));
  return out;
}

namespace {

// Bounds-checked reader over the checksummed body.
class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), left_(n) {}
  size_t left() const { return left_; }

  template <typename T>
  bool Get(T* v) {
    if (left_ < sizeof(T)) return false;
    *v = GetFixed<T>(p_);
    p_ += sizeof(T);
    left_ -= sizeof(T);
    return true;
  }
  // n doubles; n is checked against the bytes left before allocating.
  bool GetDoubles(uint32_t n, std::vector<double>* v) {
    if (uint64_t(n) * 8 > left_) return false;
    v->resize(n);
    for (uint32_t i = 0; i < n; ++i) Get(&(*v)[i]);
    return true;
  }
  bool GetBytes(uint32_t n, std::string* s) {
    if (n > left_) return false;
    s->assign(p_, n);
    p_ += n;
    left_ -= n;
    return true;
  }

 private:
  const char* p_;
  size_t left_;
};

}  // namespace

Status CalibrationMap::Decode(const std::string& bytes, CalibrationMap* map) {
  if (bytes.size() < kHeaderSize + 4) {
    return Status::Corruption("calibration map is truncated (" + std::to_string(bytes.size()) +
                              " bytes)");
  }
  if (GetFixed<uint32_t>(bytes.data()) != kMagic) {
    return Status::Corruption("not a calibration map (bad magic)");
  }
  const uint16_t version = GetFixed<uint16_t>(bytes.data() + 4);
  if (version < 1 || version > kCalibrationMapVersion) {
    return Status::Corruption("calibration map has unknown version " + std::to_string(version));
  }
  const uint32_t size = GetFixed<uint32_t>(bytes.data() + 6);
  if (size != bytes.size()) {
    return Status::Corruption("calibration map is " + std::to_string(bytes.size()) +
                              " bytes, its header says " + std::to_string(size));
  }
  const size_t body = bytes.size() - 4;
  if (Crc32c(bytes.data(), body) != GetFixed<uint32_t>(bytes.data() + body)) {
    return Status::Corruption("calibration map fails its checksum");
  }

  Reader r(bytes.data() + kHeaderSize, body - kHeaderSize);
  CalibrationMap m;
  uint8_t method = 0, score = 0, has_raw = 0, chosen = 0;
  uint32_t n = 0;
  bool ok = r.Get(&method) && r.Get(&score) && r.Get(&m.fit_base_rate) && r.Get(&m.base_rate) &&
            r.Get(&m.num_pairs) && r.Get(&m.samples) && r.Get(&m.sequence) && r.Get(&n) &&
            r.GetDoubles(n, &m.params) && r.Get(&n) && r.GetDoubles(n, &m.knot_score) &&
            r.GetDoubles(n, &m.knot_prob);
  if (ok && version >= 2) {
    ok = r.Get(&m.features) && r.Get(&n) && r.GetDoubles(n, &m.input_lo) &&
         r.GetDoubles(n, &m.input_hi) && r.GetDoubles(n, &m.input_mean) && r.Get(&n) &&
         r.GetDoubles(n, &m.feature_mean) && r.GetDoubles(n, &m.feature_scale) && r.Get(&n) &&
         r.GetDoubles(n, &m.conformal_scores) && r.Get(&n) && r.GetDoubles(n, &m.conformal_eta);
  }
  if (ok && version >= 3) {
    ok = r.Get(&n) && r.GetDoubles(n, &m.eta_knots) && r.Get(&n) &&
         r.GetDoubles(n, &m.false_match_counts) && r.Get(&n) &&
         r.GetDoubles(n, &m.false_match_kk) && r.GetDoubles(n, &m.false_match_kn) &&
         r.Get(&m.false_match_nn) && r.Get(&m.false_match_queries);
  }
  ok = ok && r.Get(&chosen) && r.Get(&m.report.split_seed) && r.Get(&has_raw) &&
       r.Get(&m.report.raw_ece) && r.Get(&m.report.raw_brier) && r.Get(&m.report.raw_log_loss) &&
       r.Get(&n);
  // Candidates: 25 bytes each, checked before allocating.
  ok = ok && uint64_t(n) * 25 <= r.left();
  if (ok) {
    m.report.candidates.resize(n);
    for (CandidateReport& c : m.report.candidates) {
      uint8_t cm = 0;
      r.Get(&cm);
      c.method = Method(cm);
      r.Get(&c.ece);
      r.Get(&c.brier);
      r.Get(&c.log_loss);
    }
  }
  ok = ok && r.Get(&n) && r.GetBytes(n, &m.report.reason);
  if (!ok) return Status::Corruption("calibration map is truncated inside its body");
  if (r.left() != 0) return Status::Corruption("calibration map has trailing bytes");
  if (!IsMethod(method) || !IsResolvedScore(score) || !IsMethod(chosen) || has_raw > 1) {
    return Status::Corruption("calibration map has an unknown method or score type");
  }
  m.method = Method(method);
  m.score_type = ScoreType(score);
  m.report.chosen = Method(chosen);
  m.report.has_raw = has_raw == 1;
  Status s = m.Validate();
  if (!s.ok()) return Status::Corruption("calibration map: " + s.message());
  *map = std::move(m);
  return Status::OK();
}

}  // namespace calibration
}  // namespace hedgedb
