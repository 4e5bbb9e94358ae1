#include "calibration/mc_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace hedgedb {
namespace calibration {
namespace {

constexpr int kDim = 8;
constexpr double kMatchA = 1.0, kMatchB = 3.0;

// Two fixed diagonal Gaussians in D = 8.
struct Gaussian {
  std::vector<double> mean, sd;
};

Gaussian MakeGaussian(uint64_t seed, double offset) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> sd(0.4, 1.0);
  Gaussian g;
  for (int d = 0; d < kDim; ++d) {
    g.mean.push_back(offset + 0.5 * normal(rng));
    g.sd.push_back(sd(rng));
  }
  return g;
}

void Draw(const Gaussian& g, int k, std::mt19937_64& rng, std::vector<double>* samples) {
  std::normal_distribution<double> normal;
  samples->resize(size_t(k) * kDim);
  for (int i = 0; i < k; ++i) {
    for (int d = 0; d < kDim; ++d) (*samples)[i * kDim + d] = g.mean[d] + g.sd[d] * normal(rng);
  }
}

// sigmoid(-a ||z1 - z2|| + b) (HIB eq. 2).
double MatchTerm(const double* z1, const double* z2) {
  double sq = 0;
  for (int d = 0; d < kDim; ++d) sq += (z1[d] - z2[d]) * (z1[d] - z2[d]);
  return 1 / (1 + std::exp(kMatchA * std::sqrt(sq) - kMatchB));
}

std::vector<double> PairTerms(const std::vector<double>& x, const std::vector<double>& y, int k) {
  std::vector<double> f(size_t(k) * k);
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) f[i * k + j] = MatchTerm(&x[i * kDim], &y[j * kDim]);
  }
  return f;
}

// The true p from 4M independent pairs (standard error ~1e-4).
double TrueMatchProbability(const Gaussian& g1, const Gaussian& g2) {
  std::mt19937_64 rng(987654321);
  std::vector<double> x, y;
  double sum = 0;
  const int batches = 2000, per_batch = 2000;
  for (int b = 0; b < batches; ++b) {
    Draw(g1, per_batch, rng, &x);
    Draw(g2, per_batch, rng, &y);
    for (int i = 0; i < per_batch; ++i) sum += MatchTerm(&x[i * kDim], &y[i * kDim]);
  }
  return sum / (double(batches) * per_batch);
}

TEST(McErrorTest, StandardErrorCoversTheTruthAtItsNominalRate) {
  const Gaussian g1 = MakeGaussian(1, 0.0), g2 = MakeGaussian(2, 0.3);
  const double truth = TrueMatchProbability(g1, g2);
  std::printf("true p = %.5f\n", truth);
  ASSERT_GT(truth, 0.1);
  ASSERT_LT(truth, 0.9);
  for (int k : {8, 32}) {
    int covered = 0;
    double sum_p = 0, sum_p2 = 0, sum_se = 0;
    const int seeds = 1000;
    for (int seed = 0; seed < seeds; ++seed) {
      std::mt19937_64 rng(1000003ULL * k + seed);
      std::vector<double> x, y;
      Draw(g1, k, rng, &x);
      Draw(g2, k, rng, &y);
      const std::vector<double> f = PairTerms(x, y, k);
      McEstimate e;
      ASSERT_TRUE(EstimateMcError(f.data(), k, k, &e).ok());
      covered += std::fabs(e.p_hat - truth) <= 1.96 * e.std_error ? 1 : 0;
      sum_p += e.p_hat;
      sum_p2 += e.p_hat * e.p_hat;
      sum_se += e.std_error;
    }
    const double coverage = double(covered) / seeds;
    const double mean = sum_p / seeds;
    const double spread = std::sqrt((sum_p2 - seeds * mean * mean) / (seeds - 1));
    const double mean_se = sum_se / seeds;
    std::printf("K = %d: coverage of p_hat +- 1.96 se %.3f; spread over seeds %.5f, mean se %.5f\n",
                k, coverage, spread, mean_se);
    EXPECT_GE(coverage, 0.90) << "K = " << k;
    EXPECT_LE(coverage, 0.98) << "K = " << k;
    EXPECT_GT(mean_se / spread, 0.8) << "K = " << k;
    EXPECT_LT(mean_se / spread, 1.25) << "K = " << k;
  }
}

// Treating the K^2 shared-sample terms as independent understates the error:
// the reason for the U-statistic estimator.
TEST(McErrorTest, NaiveIndependentTermsUnderstateTheError) {
  const Gaussian g1 = MakeGaussian(1, 0.0), g2 = MakeGaussian(2, 0.3);
  std::mt19937_64 rng(5);
  std::vector<double> x, y;
  const int k = 32;
  Draw(g1, k, rng, &x);
  Draw(g2, k, rng, &y);
  const std::vector<double> f = PairTerms(x, y, k);
  McEstimate e;
  ASSERT_TRUE(EstimateMcError(f.data(), k, k, &e).ok());
  double ss = 0;
  for (double v : f) ss += (v - e.p_hat) * (v - e.p_hat);
  const double naive = std::sqrt(ss / (f.size() - 1) / f.size());
  std::printf("K = %d: U-statistic se %.5f, naive se %.5f\n", k, e.std_error, naive);
  EXPECT_GT(e.std_error, 2 * naive);
}

TEST(McErrorTest, HandComputedAndErrors) {
  // Rows differ by 0.2, columns do not: Var_i(g) = 0.02, Var_j(h) = 0.
  const double f[4] = {0.5, 0.5, 0.3, 0.3};
  McEstimate e;
  ASSERT_TRUE(EstimateMcError(f, 2, 2, &e).ok());
  EXPECT_DOUBLE_EQ(e.p_hat, 0.4);
  EXPECT_NEAR(e.std_error, std::sqrt(0.02 / 2), 1e-12);
  const float ff[4] = {0.5f, 0.5f, 0.3f, 0.3f};
  ASSERT_TRUE(EstimateMcError(ff, 2, 2, &e).ok());
  EXPECT_NEAR(e.p_hat, 0.4, 1e-7);

  EXPECT_TRUE(EstimateMcError(f, 1, 4, &e).IsInvalidArgument());
  EXPECT_TRUE(EstimateMcError(f, 4, 1, &e).IsInvalidArgument());
  EXPECT_TRUE(EstimateMcError(static_cast<const double*>(nullptr), 2, 2, &e).IsInvalidArgument());
  const double bad[4] = {0.5, std::numeric_limits<double>::quiet_NaN(), 0.3, 0.3};
  EXPECT_TRUE(EstimateMcError(bad, 2, 2, &e).IsInvalidArgument());
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb
