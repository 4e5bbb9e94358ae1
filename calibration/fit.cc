#include "calibration/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>

#include "calibration/logistic.h"

namespace hedgedb {
namespace calibration {

namespace {

double PositiveRate(const std::vector<ScoredPair>& pairs) {
  double pos = 0;
  for (const ScoredPair& p : pairs) pos += p.is_match ? 1 : 0;
  return pos / double(pairs.size());
}

// ln(1 + e^z) without overflow.
double Softplus(double z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }

// Solves the n x n system a x = b (row-major, n <= 3) by Gaussian elimination
// with partial pivoting. False if singular.
bool Solve(std::vector<double> a, std::vector<double> b, int n, std::vector<double>* x) {
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    }
    if (std::fabs(a[pivot * n + col]) < 1e-300) return false;
    if (pivot != col) {
      for (int c = 0; c < n; ++c) std::swap(a[col * n + c], a[pivot * n + c]);
      std::swap(b[col], b[pivot]);
    }
    for (int r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / a[col * n + col];
      for (int c = col; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
      b[r] -= f * b[col];
    }
  }
  x->assign(n, 0);
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int c = r + 1; c < n; ++c) s -= a[r * n + c] * (*x)[c];
    (*x)[r] = s / a[r * n + r];
  }
  return true;
}

// Logistic regression logit P(match) = w . x + c on m features (x: n x m,
// row-major). Features are standardized for the solver; a feature with no
// spread gets weight 0. A tiny ridge on the standardized weights keeps
// separable data finite. Newton's method with step halving.
struct LogisticFit {
  std::vector<double> w;  // on the original features
  double c = 0;
};

LogisticFit FitLogistic(const std::vector<double>& x, int m, const std::vector<ScoredPair>& pairs) {
  const size_t n = pairs.size();
  constexpr double kRidge = 1e-4;
  std::vector<double> mean(m, 0), sd(m, 0);
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < m; ++k) mean[k] += x[i * m + k];
  }
  for (int k = 0; k < m; ++k) mean[k] /= double(n);
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < m; ++k) sd[k] += (x[i * m + k] - mean[k]) * (x[i * m + k] - mean[k]);
  }
  std::vector<int> used;  // features with spread
  for (int k = 0; k < m; ++k) {
    sd[k] = std::sqrt(sd[k] / double(n));
    if (sd[k] > 1e-12 * std::max(1.0, std::fabs(mean[k]))) used.push_back(k);
  }
  const int u = int(used.size()), dim = u + 1;  // weights, then the intercept
  std::vector<double> z(n * u);
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j < u; ++j) z[i * u + j] = (x[i * m + used[j]] - mean[used[j]]) / sd[used[j]];
  }
  auto loss = [&](const std::vector<double>& theta) {
    double l = 0;
    for (size_t i = 0; i < n; ++i) {
      double eta = theta[u];
      for (int j = 0; j < u; ++j) eta += theta[j] * z[i * u + j];
      l += Softplus(eta) - (pairs[i].is_match ? eta : 0);
    }
    for (int j = 0; j < u; ++j) l += 0.5 * kRidge * theta[j] * theta[j];
    return l;
  };
  std::vector<double> theta(dim, 0);
  theta[u] = Logit(std::min(std::max(PositiveRate(pairs), 1e-12), 1 - 1e-12));
  double current = loss(theta);
  for (int iter = 0; iter < 100; ++iter) {
    std::vector<double> grad(dim, 0), hess(dim * dim, 0), row(dim);
    for (size_t i = 0; i < n; ++i) {
      for (int j = 0; j < u; ++j) row[j] = z[i * u + j];
      row[u] = 1;
      double eta = 0;
      for (int j = 0; j < dim; ++j) eta += theta[j] * row[j];
      const double p = Sigmoid(eta), r = p - (pairs[i].is_match ? 1 : 0), v = p * (1 - p);
      for (int a = 0; a < dim; ++a) {
        grad[a] += r * row[a];
        for (int b = 0; b < dim; ++b) hess[a * dim + b] += v * row[a] * row[b];
      }
    }
    for (int j = 0; j < u; ++j) {
      grad[j] += kRidge * theta[j];
      hess[j * dim + j] += kRidge;
    }
    std::vector<double> step;
    if (!Solve(hess, grad, dim, &step)) break;
    double t = 1, next = current;
    std::vector<double> trial(dim);
    for (int halving = 0; halving < 40; ++halving, t *= 0.5) {
      for (int j = 0; j < dim; ++j) trial[j] = theta[j] - t * step[j];
      next = loss(trial);
      if (next <= current) break;
    }
    if (!(next <= current)) break;
    double moved = 0;
    for (int j = 0; j < dim; ++j) moved = std::max(moved, std::fabs(trial[j] - theta[j]));
    theta = trial;
    const double gain = current - next;
    current = next;
    if (moved < 1e-10 || gain < 1e-12 * std::max(1.0, current)) break;
  }
  LogisticFit fit;
  fit.w.assign(m, 0);
  fit.c = theta[u];
  for (int j = 0; j < u; ++j) {
    const int k = used[j];
    fit.w[k] = theta[j] / sd[k];
    fit.c -= theta[j] * mean[k] / sd[k];
  }
  return fit;
}

// The map fields every fitter sets: calibrated at the pairs' own rate.
CalibrationMap NewMap(Method method, const std::vector<ScoredPair>& pairs,
                      const FitOptions& options) {
  CalibrationMap map;
  map.method = method;
  map.score_type = options.score_type;
  map.fit_base_rate = PositiveRate(pairs);
  map.base_rate = map.fit_base_rate;
  map.num_pairs = int64_t(pairs.size());
  map.report.chosen = method;
  map.report.split_seed = options.split_seed;
  return map;
}

// The fitters without the checks (the cross-fit halves are checked as a whole).
CalibrationMap PlattUnchecked(const std::vector<ScoredPair>& pairs, const FitOptions& options) {
  CalibrationMap map = NewMap(Method::kPlatt, pairs, options);
  std::vector<double> x(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i)
    x[i] = TransformScore(options.score_type, pairs[i].score);
  LogisticFit fit = FitLogistic(x, 1, pairs);
  if (fit.w[0] < 0) {  // scores anti-correlated with matching: say the base rate
    fit.w[0] = 0;
    fit.c = Logit(map.fit_base_rate);
  }
  map.params = {fit.w[0], fit.c};
  return map;
}

CalibrationMap BetaUnchecked(const std::vector<ScoredPair>& pairs, const FitOptions& options) {
  CalibrationMap map = NewMap(Method::kBeta, pairs, options);
  std::vector<double> both(pairs.size() * 2), ln_s(pairs.size()), ln_1ms(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const double s = std::min(std::max(pairs[i].score, kProbabilityClip), 1 - kProbabilityClip);
    ln_s[i] = both[2 * i] = std::log(s);
    ln_1ms[i] = both[2 * i + 1] = -std::log1p(-s);
  }
  LogisticFit fit = FitLogistic(both, 2, pairs);
  double a = fit.w[0], b = fit.w[1], c = fit.c;
  // Kull et al.: a negative coefficient would break monotonicity; drop it.
  if (a < 0 || b < 0) {
    const bool keep_b = a < 0;
    LogisticFit one = FitLogistic(keep_b ? ln_1ms : ln_s, 1, pairs);
    a = keep_b ? 0 : one.w[0];
    b = keep_b ? one.w[0] : 0;
    c = one.c;
    if (one.w[0] < 0) {
      a = b = 0;
      c = Logit(map.fit_base_rate);
    }
  }
  map.params = {a, b, c};
  return map;
}

// Pool-adjacent-violators over blocks in score order; merges a block into
// its predecessor while the predecessor's mean is not below it.
struct Block {
  double lo = 0, hi = 0;  // transformed score range
  double sum = 0;         // sum of values (positives, or shrunk rate x weight)
  double weight = 0;
  double mean() const { return sum / weight; }
};

std::vector<Block> Pav(const std::vector<Block>& in) {
  std::vector<Block> out;
  for (const Block& b : in) {
    out.push_back(b);
    while (out.size() >= 2 && out[out.size() - 2].mean() >= out.back().mean()) {
      Block last = out.back();
      out.pop_back();
      out.back().hi = last.hi;
      out.back().sum += last.sum;
      out.back().weight += last.weight;
    }
  }
  return out;
}

CalibrationMap IsotonicUnchecked(const std::vector<ScoredPair>& pairs, const FitOptions& options) {
  CalibrationMap map = NewMap(Method::kIsotonic, pairs, options);
  std::vector<std::pair<double, bool>> t(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    t[i] = {TransformScore(options.score_type, pairs[i].score), pairs[i].is_match};
  }
  std::sort(t.begin(), t.end());
  std::vector<Block> groups;  // one per distinct transformed score
  for (const auto& [x, match] : t) {
    if (groups.empty() || groups.back().hi != x) groups.push_back(Block{x, x, 0, 0});
    groups.back().sum += match ? 1 : 0;
    groups.back().weight += 1;
  }
  std::vector<Block> blocks = Pav(groups);
  // Shrink each block towards the base rate, then restore monotonicity (a
  // small block can fall below a large one after shrinking).
  const double prior = std::max(options.isotonic_prior_pairs, 0.0);
  for (Block& b : blocks) {
    const double rate = (b.sum + prior * map.fit_base_rate) / (b.weight + prior);
    b.weight += prior;
    b.sum = rate * b.weight;
  }
  blocks = Pav(blocks);
  // Flat across a block, linear across the gap to the next one.
  for (const Block& b : blocks) {
    const double p = std::min(std::max(b.mean(), 0.0), 1.0);
    const double floor = map.knot_prob.empty() ? 0 : map.knot_prob.back();
    map.knot_score.push_back(b.lo);
    map.knot_prob.push_back(std::max(p, floor));
    if (b.hi > b.lo) {
      map.knot_score.push_back(b.hi);
      map.knot_prob.push_back(std::max(p, floor));
    }
  }
  return map;
}

CalibrationMap FitUnchecked(Method method, const std::vector<ScoredPair>& pairs,
                            const FitOptions& options) {
  switch (method) {
    case Method::kPlatt:
      return PlattUnchecked(pairs, options);
    case Method::kBeta:
      return BetaUnchecked(pairs, options);
    case Method::kIsotonic:
      break;
  }
  return IsotonicUnchecked(pairs, options);
}

// Re-targets a freshly fitted map to options.target_base_rate (if any).
Status Finish(const FitOptions& options, CalibrationMap* map) {
  if (options.target_base_rate != 0)
    HEDGEDB_RETURN_IF_ERROR(map->SetBaseRate(options.target_base_rate));
  return map->Validate();
}

double PairLogLoss(double p, bool match) {
  const double clipped = std::min(std::max(p, kLogLossClip), 1 - kLogLossClip);
  return match ? -std::log(clipped) : -std::log1p(-clipped);
}

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

Status ValidatePairs(const std::vector<ScoredPair>& pairs, const FitOptions& options) {
  if (uint8_t(options.score_type) < uint8_t(ScoreType::kMc) ||
      uint8_t(options.score_type) > uint8_t(ScoreType::kLogprob)) {
    return Status::InvalidArgument(
        "calibration needs a resolved score type (mc, csd, mls, l2, "
        "match or logprob), not default");
  }
  if (options.target_base_rate != 0 &&
      !(options.target_base_rate > 0 && options.target_base_rate < 1)) {
    return Status::InvalidArgument(
        "target base rate must be in (0, 1) (or 0 for the pairs' own), "
        "got " +
        std::to_string(options.target_base_rate));
  }
  if (pairs.empty()) {
    return Status::InvalidArgument(
        "no labelled pairs: calibration needs pairs of items with known labels");
  }
  const bool probability = IsProbabilityScore(options.score_type);
  int64_t matches = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const double s = pairs[i].score;
    if (!std::isfinite(s)) {
      return Status::InvalidArgument("score of pair " + std::to_string(i) + " is " +
                                     (std::isnan(s) ? "NaN" : "infinite"));
    }
    if (probability && !(s >= 0 && s <= 1)) {
      return Status::InvalidArgument("score of pair " + std::to_string(i) + " is " +
                                     std::to_string(s) + ", outside [0, 1] for score " +
                                     ScoreName(options.score_type));
    }
    matches += pairs[i].is_match ? 1 : 0;
  }
  const int64_t n = int64_t(pairs.size()), non_matches = n - matches;
  if (matches == 0 || non_matches == 0) {
    return Status::InvalidArgument("only one class: all " + std::to_string(n) + " pairs are " +
                                   (matches == 0 ? "non-matches" : "matches") +
                                   "; calibration needs both matching and non-matching pairs");
  }
  if (n < options.min_pairs) {
    return Status::InvalidArgument("too few pairs: " + std::to_string(n) +
                                   " labelled pairs, calibration needs at least " +
                                   std::to_string(options.min_pairs));
  }
  if (std::min(matches, non_matches) < options.min_pairs_per_class) {
    return Status::InvalidArgument("too few pairs: " + std::to_string(matches) + " matching and " +
                                   std::to_string(non_matches) +
                                   " non-matching pairs, calibration needs at least " +
                                   std::to_string(options.min_pairs_per_class) + " of each");
  }
  return Status::OK();
}

namespace {

// Checks, fits one method on all pairs, re-targets; *map only on success.
Status FitOne(Method method, const std::vector<ScoredPair>& pairs, const FitOptions& options,
              CalibrationMap* map) {
  HEDGEDB_RETURN_IF_ERROR(ValidatePairs(pairs, options));
  if (method == Method::kBeta && !IsProbabilityScore(options.score_type)) {
    return Status::InvalidArgument(std::string("beta calibration needs a probability score (mc, "
                                               "match), not ") +
                                   ScoreName(options.score_type));
  }
  CalibrationMap m = FitUnchecked(method, pairs, options);
  HEDGEDB_RETURN_IF_ERROR(Finish(options, &m));
  *map = std::move(m);
  return Status::OK();
}

}  // namespace

Status FitPlatt(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                CalibrationMap* map) {
  return FitOne(Method::kPlatt, pairs, options, map);
}

Status FitBeta(const std::vector<ScoredPair>& pairs, const FitOptions& options,
               CalibrationMap* map) {
  return FitOne(Method::kBeta, pairs, options, map);
}

Status FitIsotonic(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                   CalibrationMap* map) {
  return FitOne(Method::kIsotonic, pairs, options, map);
}

Status FitCalibration(const std::vector<ScoredPair>& pairs, const FitOptions& options,
                      CalibrationMap* map) {
  HEDGEDB_RETURN_IF_ERROR(ValidatePairs(pairs, options));
  // Stratified split: each half keeps the pairs' positive rate.
  std::vector<size_t> pos, neg;
  for (size_t i = 0; i < pairs.size(); ++i) (pairs[i].is_match ? pos : neg).push_back(i);
  std::mt19937_64 rng(options.split_seed);
  std::shuffle(pos.begin(), pos.end(), rng);
  std::shuffle(neg.begin(), neg.end(), rng);
  std::vector<ScoredPair> half[2];
  std::vector<size_t> index[2];
  for (const std::vector<size_t>* cls : {&pos, &neg}) {
    for (size_t k = 0; k < cls->size(); ++k) {
      half[k % 2].push_back(pairs[(*cls)[k]]);
      index[k % 2].push_back((*cls)[k]);
    }
  }

  std::vector<Method> methods = {Method::kPlatt};
  if (IsProbabilityScore(options.score_type)) methods.push_back(Method::kBeta);
  methods.push_back(Method::kIsotonic);

  FitReport report;
  report.split_seed = options.split_seed;
  std::vector<std::vector<double>> losses;  // per candidate, per pair (held out)
  for (Method method : methods) {
    std::vector<ScoredPair> held_out(pairs.size());
    for (int h = 0; h < 2; ++h) {
      const CalibrationMap fitted = FitUnchecked(method, half[h], options);
      const std::vector<ScoredPair>& other = half[1 - h];
      for (size_t k = 0; k < other.size(); ++k) {
        held_out[index[1 - h][k]] = {fitted.Apply(other[k].score), other[k].is_match};
      }
    }
    CalibrationMetrics metrics;
    HEDGEDB_RETURN_IF_ERROR(MeasureCalibration(held_out, &metrics, options.ece_bins));
    report.candidates.push_back({method, metrics.ece, metrics.brier, metrics.log_loss});
    std::vector<double> loss(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i)
      loss[i] = PairLogLoss(held_out[i].score, pairs[i].is_match);
    losses.push_back(std::move(loss));
  }
  if (IsProbabilityScore(options.score_type)) {
    CalibrationMetrics metrics;  // the raw score is already a probability
    HEDGEDB_RETURN_IF_ERROR(MeasureCalibration(pairs, &metrics, options.ece_bins));
    report.has_raw = true;
    report.raw_ece = metrics.ece;
    report.raw_brier = metrics.brier;
    report.raw_log_loss = metrics.log_loss;
  }

  // Lowest held-out log loss; the simplest candidate within the tie margin
  // of it wins (a more complex map must earn its parameters).
  size_t best = 0;
  for (size_t c = 1; c < methods.size(); ++c) {
    if (report.candidates[c].log_loss < report.candidates[best].log_loss) best = c;
  }
  const double n = double(pairs.size());
  size_t chosen = best;
  for (size_t c = 0; c < best; ++c) {
    double mean = 0, sq = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const double d = losses[c][i] - losses[best][i];
      mean += d;
      sq += d * d;
    }
    mean /= n;
    const double se = std::sqrt(std::max(sq / n - mean * mean, 0.0) / n);
    if (mean <= options.tie_tolerance + options.tie_z * se) {
      chosen = c;
      break;
    }
  }
  report.chosen = methods[chosen];
  std::string reason = std::string(MethodName(methods[chosen])) + ": held-out log loss";
  for (size_t c = 0; c < methods.size(); ++c) {
    reason += std::string(c ? ", " : " ") + MethodName(methods[c]) + " " +
              Format("%.5f", report.candidates[c].log_loss);
  }
  if (chosen == best) {
    reason += methods.size() > 1 && best > 0
                  ? "; lowest, beyond the tie margin of every simpler method"
                  : "; lowest, and the simplest";
  } else {
    reason += std::string("; within the tie margin of the lowest (") + MethodName(methods[best]) +
              "), the simpler method wins";
  }
  report.reason = reason;

  CalibrationMap m = FitUnchecked(methods[chosen], pairs, options);
  m.report = std::move(report);
  HEDGEDB_RETURN_IF_ERROR(Finish(options, &m));
  *map = std::move(m);
  return Status::OK();
}

}  // namespace calibration
}  // namespace hedgedb
