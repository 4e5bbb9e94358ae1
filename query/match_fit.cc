// Fitting match_a and match_b to labelled items (query/match_fit.h).
#include "query/match_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "common/random.h"
#include "common/row_layout.h"
#include "hedgedb/match_parameters.h"
#include "query/row_checks.h"

namespace hedgedb {
namespace query {
namespace {

// One draw from an item row: a gaussian's N(mu, diag var), or a mixture's
// component picked by its weight first.
void DrawSample(const CollectionSpec& spec, const float* row, uint64_t* state, float* z) {
  const int d = spec.dim;
  const float* mu = row;
  const float* var = row + d;
  if (spec.kind == Kind::kMog) {
    const int c = spec.components;
    const double u = double(SplitMix64(state) >> 11) * 0x1.0p-53;
    double acc = 0;
    int pick = c - 1;
    for (int j = 0; j < c; ++j) {
      acc += row[j];
      if (u < acc) {
        pick = j;
        break;
      }
    }
    mu = row + c + size_t(pick) * d;
    var = row + c + size_t(c) * d + size_t(pick) * d;
  }
  for (int i = 0; i < d; i += 2) {
    const double u1 = (double(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = double(SplitMix64(state) >> 11) * 0x1.0p-53;          // [0, 1)
    double g0, g1;
    BoxMuller(u1, u2, &g0, &g1);
    z[i] = float(mu[i] + std::sqrt(double(var[i])) * g0);
    if (i + 1 < d) z[i + 1] = float(mu[i + 1] + std::sqrt(double(var[i + 1])) * g1);
  }
}

double Sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

// The balanced log loss at (a, b) and, if asked, its gradient and Hessian in
// (t = log a, b).
struct Objective {
  const MatchPairs& p;
  double w_pos, w_neg;
  double Value(double a, double b, double grad[2] = nullptr, double hess[3] = nullptr) const {
    const int k = p.samples;
    double loss = 0, g[2] = {0, 0}, h[3] = {0, 0, 0};
    for (int64_t i = 0; i < p.pairs(); ++i) {
      const float* d = p.distances.data() + i * k;
      // p and its derivatives in (a, b).
      double q = 0, qa = 0, qb = 0, qaa = 0, qab = 0, qbb = 0;
      for (int j = 0; j < k; ++j) {
        const double s = Sigmoid(-a * d[j] + b), g1 = s * (1 - s), g2 = g1 * (1 - 2 * s);
        q += s;
        qa -= d[j] * g1;
        qb += g1;
        qaa += double(d[j]) * d[j] * g2;
        qab -= d[j] * g2;
        qbb += g2;
      }
      q /= k, qa /= k, qb /= k, qaa /= k, qab /= k, qbb /= k;
      q = std::min(std::max(q, 1e-12), 1 - 1e-12);
      const bool y = p.same_label[size_t(i)] != 0;
      const double w = y ? w_pos : w_neg;
      loss -= w * (y ? std::log(q) : std::log1p(-q));
      if (!grad) continue;
      // d(-log lik)/dq and its derivative.
      const double u = y ? -1 / q : 1 / (1 - q);
      const double v = y ? 1 / (q * q) : 1 / ((1 - q) * (1 - q));
      // Chain rule into t = log a: dq/dt = a qa, d2q/dt2 = a qa + a^2 qaa.
      const double qt = a * qa, qtt = a * qa + a * a * qaa, qtb = a * qab;
      g[0] += w * u * qt;
      g[1] += w * u * qb;
      h[0] += w * (v * qt * qt + u * qtt);
      h[1] += w * (v * qt * qb + u * qtb);
      h[2] += w * (v * qb * qb + u * qbb);
    }
    if (grad) grad[0] = g[0], grad[1] = g[1];
    if (hess) hess[0] = h[0], hess[1] = h[1], hess[2] = h[2];
    return loss;
  }
};

}  // namespace

Status DrawMatchPairs(const CollectionSpec& spec, const std::vector<const float*>& rows,
                      const std::vector<int64_t>& labels, uint64_t seed, MatchPairs* out,
                      int64_t max_pairs, int samples) {
  if (spec.kind != Kind::kGaussian && spec.kind != Kind::kMog) {
    return Status::InvalidArgument(std::string("only gaussian and mog collections have match "
                                               "parameters to fit; this one holds ") +
                                   KindName(spec.kind));
  }
  const int64_t n = int64_t(rows.size());
  uint64_t state = StreamSeed(seed, 0x3A7C4);
  const auto below = [&state](uint64_t m) { return SplitMix64(&state) % m; };
  // Items by label, in a fixed order (the map's is not seeded).
  std::map<int64_t, std::vector<int64_t>> by_label;
  for (int64_t i = 0; i < n; ++i) by_label[labels[size_t(i)]].push_back(i);
  // Same-label pairs: all of them when they are few, else `half` drawn
  // (with replacement) as a label by its share of the pairs, then two of its
  // items: every same-label pair is equally likely, whatever the number of
  // labels, and no list of all pairs is built.
  std::vector<const std::vector<int64_t>*> groups;
  std::vector<double> cumulative;
  double total = 0;
  for (const auto& kv : by_label) {
    const double m = double(kv.second.size());
    if (m < 2) continue;
    groups.push_back(&kv.second);
    total += m * (m - 1) / 2;
    cumulative.push_back(total);
  }
  if (groups.empty() || by_label.size() < 2) {
    return Status::InvalidArgument(
        "fitting match_a and match_b needs labelled items of at least two labels, two of one "
        "label at least");
  }
  const size_t half = size_t(std::max<int64_t>(1, max_pairs / 2));
  std::vector<std::pair<int64_t, int64_t>> positives, negatives;
  if (total <= double(half)) {
    for (const auto* g : groups) {
      for (size_t a = 0; a < g->size(); ++a)
        for (size_t b = a + 1; b < g->size(); ++b) positives.emplace_back((*g)[a], (*g)[b]);
    }
  } else {
    for (size_t k = 0; k < half; ++k) {
      const double u = double(SplitMix64(&state) >> 11) * 0x1.0p-53 * total;
      const size_t g = std::min(
          groups.size() - 1,
          size_t(std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin()));
      const std::vector<int64_t>& members = *groups[g];
      const uint64_t a = below(members.size());
      uint64_t b = below(members.size() - 1);
      if (b >= a) ++b;
      positives.emplace_back(members[a], members[b]);
    }
  }
  // As many pairs of different labels, drawn from every item.
  const size_t want = positives.size();
  for (int64_t tries = 0; negatives.size() < want && tries < int64_t(want) * 1000; ++tries) {
    const int64_t i = int64_t(below(uint64_t(n)));
    const int64_t j = int64_t(below(uint64_t(n)));
    if (labels[size_t(i)] != labels[size_t(j)]) negatives.emplace_back(i, j);
  }
  if (negatives.empty()) {
    return Status::InvalidArgument("fitting match_a and match_b found no pair of two labels");
  }
  out->samples = samples;
  out->positives = int64_t(positives.size());
  out->same_label.assign(positives.size(), 1);
  out->same_label.resize(positives.size() + negatives.size(), 0);
  out->distances.resize(out->same_label.size() * size_t(samples));
  std::vector<float> z1(size_t(spec.dim)), z2(size_t(spec.dim));
  size_t at = 0;
  for (const auto* list : {&positives, &negatives}) {
    for (const auto& pr : *list) {
      for (int s = 0; s < samples; ++s) {
        DrawSample(spec, rows[size_t(pr.first)], &state, z1.data());
        DrawSample(spec, rows[size_t(pr.second)], &state, z2.data());
        double d2 = 0;
        for (int i = 0; i < spec.dim; ++i) d2 += double(z1[i] - z2[i]) * (z1[i] - z2[i]);
        out->distances[at++] = float(std::sqrt(d2));
      }
    }
  }
  return Status::OK();
}

Status FitMatchParameters(const MatchPairs& pairs, MatchFit* out) {
  const int64_t n = pairs.pairs(), pos = pairs.positives;
  if (pos < 1 || pos >= n || pairs.samples < 1) {
    return Status::InvalidArgument("fitting match_a and match_b needs pairs of both kinds");
  }
  const Objective f{pairs, 0.5 / double(pos), 0.5 / double(n - pos)};
  // Start: a logistic fit of the label on the mean distance (Newton on two
  // parameters, a few steps), standardised so that a and b start sensible.
  std::vector<double> mean(static_cast<size_t>(n));
  double mu = 0, sd = 0;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < pairs.samples; ++j) s += pairs.distances[size_t(i * pairs.samples + j)];
    mean[size_t(i)] = s / pairs.samples;
    mu += mean[size_t(i)];
  }
  mu /= double(n);
  for (double m : mean) sd += (m - mu) * (m - mu);
  sd = std::sqrt(sd / double(n));
  if (!(sd > 0)) return Status::InvalidArgument("every pair is at the same distance: no fit");
  double a = 1 / sd, b = mu / sd;  // sigmoid(-(d - mu) / sd)
  double t = std::log(a);
  // Labels the distances separate perfectly would drive a to infinity (p a
  // step, every eta 0): a stays at most 50 / sd, a slope over which p goes
  // from 0.5 to 1 - 1e-21 within one standard deviation of the distances.
  const double max_t = std::log(50 / sd);
  double loss = f.Value(a, b);
  int it = 0;
  for (; it < 100; ++it) {
    double g[2], h[3];
    f.Value(a, b, g, h);
    // Newton with Levenberg damping until the Hessian is positive definite.
    double lambda = 0, step[2] = {0, 0};
    for (int tries = 0; tries < 30; ++tries) {
      const double h0 = h[0] + lambda, h2 = h[2] + lambda, det = h0 * h2 - h[1] * h[1];
      if (h0 > 0 && det > 0) {
        step[0] = -(h2 * g[0] - h[1] * g[1]) / det;
        step[1] = -(h0 * g[1] - h[1] * g[0]) / det;
        break;
      }
      lambda = lambda == 0 ? 1e-6 + 1e-3 * (std::fabs(h[0]) + std::fabs(h[2])) : lambda * 10;
    }
    // Backtracking: the loss must not rise.
    double scale = 1, next = loss, nt = t, nb = b;
    for (int tries = 0; tries < 40; ++tries, scale /= 2) {
      nt = std::min(t + scale * step[0], max_t);
      nb = b + scale * step[1];
      next = f.Value(std::exp(nt), nb);
      if (std::isfinite(next) && next <= loss) break;
    }
    const bool done = !(next < loss - 1e-12 * std::max(1.0, loss));
    if (next <= loss) t = nt, b = nb, a = std::exp(t), loss = next;
    if (done || std::fabs(g[0]) + std::fabs(g[1]) < 1e-10) break;
  }
  if (!(a > 1e-8) || !std::isfinite(a) || !std::isfinite(b)) {
    return Status::InvalidArgument(
        "the labels do not depend on the distance (the fitted match_a goes to 0): nothing to "
        "fit");
  }
  out->match_a = a;
  out->match_b = b;
  out->log_loss = loss;
  out->iterations = it + 1;
  return Status::OK();
}

Status FitMatchParametersOfView(const CollectionSpec& spec, const EmbeddingView& items,
                                const int64_t* labels, uint64_t seed, MatchFit* out) {
  const RowShape shape = RowShapeOf(spec);
  HEDGEDB_RETURN_IF_ERROR(CheckItemRows(shape, items));
  const size_t floats = ItemRowSize(spec);
  std::vector<float> packed(size_t(items.n) * floats);
  std::vector<const float*> rows(static_cast<size_t>(items.n));
  for (int64_t i = 0; i < items.n; ++i) {
    float* row = packed.data() + size_t(i) * floats;
    PackFloatRow(shape, items, i, row);
    rows[size_t(i)] = row;
  }
  MatchPairs pairs;
  HEDGEDB_RETURN_IF_ERROR(
      DrawMatchPairs(spec, rows, std::vector<int64_t>(labels, labels + items.n), seed, &pairs));
  return FitMatchParameters(pairs, out);
}

}  // namespace query

Status FitMatchParameters(const CollectionSpec& spec, const EmbeddingView& items,
                          const int64_t* labels, uint64_t seed, float* match_a, float* match_b) {
  if (!labels) return Status::InvalidArgument("fitting match_a and match_b needs labels");
  query::MatchFit fit;
  HEDGEDB_RETURN_IF_ERROR(query::FitMatchParametersOfView(spec, items, labels, seed, &fit));
  if (!(float(fit.match_a) > 0) || !std::isfinite(float(fit.match_a)) ||
      !std::isfinite(float(fit.match_b))) {
    return Status::InvalidArgument("the fitted match_a and match_b leave float's range");
  }
  *match_a = float(fit.match_a);
  *match_b = float(fit.match_b);
  return Status::OK();
}

}  // namespace hedgedb
