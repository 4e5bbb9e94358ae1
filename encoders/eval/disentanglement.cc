#include "encoders/eval/disentanglement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace hedgedb {
namespace encoders {
namespace {

// Mutual information (nats) of two discrete variables given as indices.
double MutualInformation(const std::vector<int>& a, int a_values, const std::vector<int64_t>& b,
                         int64_t b_stride, int64_t b_offset, int64_t b_values) {
  const size_t n = a.size();
  std::vector<double> joint(static_cast<size_t>(a_values) * static_cast<size_t>(b_values), 0.0),
      pa(static_cast<size_t>(a_values), 0.0), pb(static_cast<size_t>(b_values), 0.0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = b[i * static_cast<size_t>(b_stride) + static_cast<size_t>(b_offset)];
    joint[static_cast<size_t>(a[i]) * static_cast<size_t>(b_values) + static_cast<size_t>(v)] +=
        1.0;
    pa[static_cast<size_t>(a[i])] += 1.0;
    pb[static_cast<size_t>(v)] += 1.0;
  }
  double mi = 0;
  for (int x = 0; x < a_values; ++x) {
    for (int64_t y = 0; y < b_values; ++y) {
      const double j =
          joint[static_cast<size_t>(x) * static_cast<size_t>(b_values) + static_cast<size_t>(y)];
      if (j > 0)
        mi += j / n * std::log(j * n / (pa[static_cast<size_t>(x)] * pb[static_cast<size_t>(y)]));
    }
  }
  return std::max(0.0, mi);
}

Status CheckFactors(const std::vector<int64_t>& factors, int64_t n,
                    const std::vector<int64_t>& sizes) {
  const size_t f = sizes.size();
  if (factors.size() != static_cast<size_t>(n) * f) {
    return Status::InvalidArgument("disentanglement: " + std::to_string(factors.size()) +
                                   " factor values for " + std::to_string(n) + " items x " +
                                   std::to_string(f) + " factors");
  }
  for (size_t i = 0; i < factors.size(); ++i) {
    if (factors[i] < 0 || factors[i] >= sizes[i % f]) {
      return Status::InvalidArgument("disentanglement: factor value " + std::to_string(factors[i]) +
                                     " outside 0.." + std::to_string(sizes[i % f] - 1));
    }
  }
  return Status::OK();
}

// Largest eigenvalue of X^T X / n (power iteration), X = [features, 1].
double LargestEigenvalue(const std::vector<double>& x, int64_t n, int64_t cols) {
  std::vector<double> v(static_cast<size_t>(cols), 1.0 / std::sqrt(double(cols))),
      xv(static_cast<size_t>(n)), next;
  double lambda = 1.0;
  for (int it = 0; it < 30; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      xv[static_cast<size_t>(i)] =
          std::inner_product(v.begin(), v.end(), x.begin() + i * cols, 0.0);
    }
    next.assign(static_cast<size_t>(cols), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < cols; ++c)
        next[static_cast<size_t>(c)] +=
            x[static_cast<size_t>(i * cols + c)] * xv[static_cast<size_t>(i)];
    }
    double norm = 0;
    for (double& value : next) {
      value /= double(n);
      norm += value * value;
    }
    norm = std::sqrt(norm);
    if (!(norm > 0)) return 1.0;
    lambda = norm;
    for (size_t c = 0; c < next.size(); ++c) v[c] = next[c] / norm;
  }
  return lambda;
}

// Weights [cols] of an L2-penalised logistic regression (last column: bias,
// not penalised) by Nesterov's accelerated gradient with step 1 / L.
std::vector<double> FitLogistic(const std::vector<double>& x, int64_t n, int64_t cols,
                                const std::vector<uint8_t>& y, double lipschitz,
                                const ExplicitnessOptions& options) {
  const double step = 1.0 / lipschitz;
  std::vector<double> w(static_cast<size_t>(cols), 0.0),
      previous = w, look(static_cast<size_t>(cols)), grad(static_cast<size_t>(cols));
  for (int it = 0; it < options.iterations; ++it) {
    const double momentum = double(it) / (it + 3);
    for (size_t c = 0; c < w.size(); ++c) look[c] = w[c] + momentum * (w[c] - previous[c]);
    std::fill(grad.begin(), grad.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double* row = x.data() + i * cols;
      const double z = std::inner_product(look.begin(), look.end(), row, 0.0);
      const double residual = 1.0 / (1.0 + std::exp(-z)) - (y[static_cast<size_t>(i)] ? 1.0 : 0.0);
      for (int64_t c = 0; c < cols; ++c) grad[static_cast<size_t>(c)] += residual * row[c];
    }
    for (int64_t c = 0; c < cols; ++c) {
      grad[static_cast<size_t>(c)] /= double(n);
      if (c + 1 < cols)
        grad[static_cast<size_t>(c)] += options.l2 / double(n) * look[static_cast<size_t>(c)];
    }
    previous = w;
    for (size_t c = 0; c < w.size(); ++c) w[c] = look[c] - step * grad[c];
  }
  return w;
}

}  // namespace

Status FactorsOfLabels(const std::vector<int64_t>& labels, const std::vector<int64_t>& sizes,
                       std::vector<int64_t>* factors) {
  int64_t classes = 1;
  for (int64_t s : sizes) {
    if (s < 1) return Status::InvalidArgument("factor sizes must be >= 1");
    classes *= s;
  }
  factors->assign(labels.size() * sizes.size(), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return Status::InvalidArgument("label " + std::to_string(labels[i]) +
                                     " is not a composite of " + std::to_string(sizes.size()) +
                                     " factors (0.." + std::to_string(classes - 1) + ")");
    }
    int64_t rest = labels[i];
    for (size_t p = sizes.size(); p-- > 0;) {
      (*factors)[i * sizes.size() + p] = rest % sizes[p];
      rest /= sizes[p];
    }
  }
  return Status::OK();
}

Status Modularity(const EmbeddingMatrix& e, const std::vector<int64_t>& factors,
                  const std::vector<int64_t>& sizes, int bins, ModularityResult* result) {
  const int64_t num_factors = static_cast<int64_t>(sizes.size());
  if (num_factors < 2) return Status::InvalidArgument("modularity needs at least 2 factors");
  if (bins < 2) return Status::InvalidArgument("modularity needs at least 2 bins");
  if (e.n < 2 || e.dim < 1) return Status::InvalidArgument("modularity needs 2 or more items");
  HEDGEDB_RETURN_IF_ERROR(CheckFactors(factors, e.n, sizes));
  double total = 0;
  int64_t scored = 0;
  std::vector<int> binned(static_cast<size_t>(e.n));
  for (int64_t d = 0; d < e.dim; ++d) {
    float lo = e.values[d], hi = e.values[d];
    for (int64_t i = 0; i < e.n; ++i) {
      const float v = e.values[i * e.dim + d];
      if (!std::isfinite(v)) {
        return Status::InvalidArgument("modularity: non-finite value at item " + std::to_string(i) +
                                       ", dimension " + std::to_string(d));
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    // Equal-width bins over the dimension's range; the maximum goes into the last.
    const double width = (double(hi) - double(lo)) / bins;
    for (int64_t i = 0; i < e.n; ++i) {
      const double v = e.values[i * e.dim + d];
      binned[static_cast<size_t>(i)] = width > 0 ? std::min(bins - 1, int((v - lo) / width)) : 0;
    }
    std::vector<double> m(static_cast<size_t>(num_factors));
    for (int64_t f = 0; f < num_factors; ++f) {
      m[static_cast<size_t>(f)] =
          MutualInformation(binned, bins, factors, num_factors, f, sizes[static_cast<size_t>(f)]);
    }
    const size_t best = static_cast<size_t>(std::max_element(m.begin(), m.end()) - m.begin());
    const double theta = m[best];
    if (!(theta > 1e-12)) continue;
    double deviation = 0;
    for (size_t f = 0; f < m.size(); ++f) {
      const double t = f == best ? theta : 0.0;
      deviation += (m[f] - t) * (m[f] - t);
    }
    total += 1.0 - deviation / (theta * theta * double(num_factors - 1));
    ++scored;
  }
  if (scored == 0)
    return Status::InvalidArgument("modularity: no dimension informs about any factor");
  result->modularity = total / double(scored);
  result->dimensions_scored = scored;
  return Status::OK();
}

Status RocAuc(const std::vector<double>& scores, const std::vector<uint8_t>& positive,
              double* auc) {
  if (scores.size() != positive.size()) return Status::InvalidArgument("AUC: sizes differ");
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney: the positives' rank sum, tied scores sharing their mean rank.
  double rank_sum = 0;
  int64_t positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = 0.5 * double(i + 1 + j);  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      if (positive[order[k]]) {
        rank_sum += mean_rank;
        ++positives;
      }
    }
    i = j;
  }
  const int64_t negatives = static_cast<int64_t>(scores.size()) - positives;
  if (positives == 0 || negatives == 0) {
    return Status::InvalidArgument("AUC needs positives and negatives");
  }
  *auc = (rank_sum - 0.5 * double(positives) * double(positives + 1)) /
         (double(positives) * double(negatives));
  return Status::OK();
}

Status Explicitness(const EmbeddingMatrix& train, const std::vector<int64_t>& train_factors,
                    const EmbeddingMatrix& test, const std::vector<int64_t>& test_factors,
                    const std::vector<int64_t>& sizes, const ExplicitnessOptions& options,
                    ExplicitnessResult* result) {
  if (sizes.empty()) return Status::InvalidArgument("explicitness needs at least 1 factor");
  if (train.dim != test.dim || train.n < 2 || test.n < 2) {
    return Status::InvalidArgument("explicitness: needs 2 or more items of equal dimension");
  }
  if (options.iterations < 1 || !(options.l2 >= 0)) {
    return Status::InvalidArgument("explicitness: iterations >= 1 and l2 >= 0");
  }
  HEDGEDB_RETURN_IF_ERROR(CheckFactors(train_factors, train.n, sizes));
  HEDGEDB_RETURN_IF_ERROR(CheckFactors(test_factors, test.n, sizes));
  const int64_t dim = train.dim, cols = dim + 1;
  std::vector<double> mean(static_cast<size_t>(dim), 0.0), sd(static_cast<size_t>(dim), 0.0);
  for (int64_t i = 0; i < train.n; ++i) {
    for (int64_t d = 0; d < dim; ++d) mean[static_cast<size_t>(d)] += train.values[i * dim + d];
  }
  for (double& m : mean) m /= double(train.n);
  for (int64_t i = 0; i < train.n; ++i) {
    for (int64_t d = 0; d < dim; ++d) {
      const double c = train.values[i * dim + d] - mean[static_cast<size_t>(d)];
      sd[static_cast<size_t>(d)] += c * c;
    }
  }
  for (double& s : sd)
    s = std::sqrt(s / double(train.n)) > 0 ? std::sqrt(s / double(train.n)) : 1.0;
  const auto standardise = [&](const EmbeddingMatrix& e, std::vector<double>* x) -> Status {
    x->resize(static_cast<size_t>(e.n * cols));
    for (int64_t i = 0; i < e.n; ++i) {
      for (int64_t d = 0; d < dim; ++d) {
        const float v = e.values[i * dim + d];
        if (!std::isfinite(v)) {
          return Status::InvalidArgument("explicitness: non-finite value at item " +
                                         std::to_string(i) + ", dimension " + std::to_string(d));
        }
        (*x)[static_cast<size_t>(i * cols + d)] =
            (v - mean[static_cast<size_t>(d)]) / sd[static_cast<size_t>(d)];
      }
      (*x)[static_cast<size_t>(i * cols + dim)] = 1.0;
    }
    return Status::OK();
  };
  std::vector<double> x_train, x_test;
  HEDGEDB_RETURN_IF_ERROR(standardise(train, &x_train));
  HEDGEDB_RETURN_IF_ERROR(standardise(test, &x_test));
  const double lipschitz =
      0.25 * LargestEigenvalue(x_train, train.n, cols) + options.l2 / double(train.n);

  const size_t num_factors = sizes.size();
  result->per_factor.assign(num_factors, 0.0);
  double total = 0;
  int64_t scored = 0;
  std::vector<uint8_t> y_train(static_cast<size_t>(train.n)), y_test(static_cast<size_t>(test.n));
  std::vector<double> scores(static_cast<size_t>(test.n));
  for (size_t f = 0; f < num_factors; ++f) {
    double factor_total = 0;
    int64_t factor_scored = 0;
    for (int64_t value = 0; value < sizes[f]; ++value) {
      int64_t train_pos = 0, test_pos = 0;
      for (int64_t i = 0; i < train.n; ++i) {
        train_pos += y_train[static_cast<size_t>(i)] =
            train_factors[static_cast<size_t>(i) * num_factors + f] == value;
      }
      for (int64_t i = 0; i < test.n; ++i) {
        test_pos += y_test[static_cast<size_t>(i)] =
            test_factors[static_cast<size_t>(i) * num_factors + f] == value;
      }
      // A value absent from either set, or making up all of it, has no AUC.
      if (train_pos == 0 || train_pos == train.n || test_pos == 0 || test_pos == test.n) continue;
      const std::vector<double> w =
          FitLogistic(x_train, train.n, cols, y_train, lipschitz, options);
      for (int64_t i = 0; i < test.n; ++i) {
        scores[static_cast<size_t>(i)] =
            std::inner_product(w.begin(), w.end(), x_test.begin() + i * cols, 0.0);
      }
      double auc = 0;
      HEDGEDB_RETURN_IF_ERROR(RocAuc(scores, y_test, &auc));
      factor_total += auc;
      ++factor_scored;
    }
    if (factor_scored > 0) result->per_factor[f] = factor_total / double(factor_scored);
    total += factor_total;
    scored += factor_scored;
  }
  if (scored == 0) return Status::InvalidArgument("explicitness: no factor value could be scored");
  result->explicitness = total / double(scored);
  result->values_scored = scored;
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
