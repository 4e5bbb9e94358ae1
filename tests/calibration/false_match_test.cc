// Risk-controlled thresholds (CalibrationMap::FalseMatchThreshold,
// docs/calibration.md, "False-match rate"): the Clopper-Pearson bound against
// its closed forms and published values, the threshold against a direct
// count, the guarantee over many seeds where the true false-match rate of
// every threshold is known exactly, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "calibration/calibration_map.h"

namespace hedgedb {
namespace calibration {
namespace {

TEST(ClopperPearsonTest, MatchesClosedFormsAndTables) {
  // No successes: 1 - (1 - c)^(1/n).
  for (int64_t n : {1, 10, 300, 100000}) {
    for (double c : {0.9, 0.95, 0.99}) {
      const double want = 1 - std::pow(1 - c, 1.0 / double(n));
      EXPECT_NEAR(ClopperPearsonUpper(0, n, c), want, 1e-12 * std::max(want, 1e-3)) << n << " " << c;
    }
  }
  // n - 1 successes of n: P(X <= n - 1) = 1 - p^n = 1 - c, so p = c^(1/n).
  EXPECT_NEAR(ClopperPearsonUpper(9, 10, 0.95), std::pow(0.95, 0.1), 1e-12);
  // One-sided 95% upper limits: 1 of 10, 0.39416 (the binomial tables'
  // 0.3942); 5 of 100, 0.102253 (bisection on the exact binomial sum with
  // Python's math.comb).
  EXPECT_NEAR(ClopperPearsonUpper(1, 10, 0.95), 0.3941633, 1e-6);
  EXPECT_NEAR(ClopperPearsonUpper(5, 100, 0.95), 0.1022534, 1e-6);
  EXPECT_EQ(ClopperPearsonUpper(10, 10, 0.95), 1.0);
  // Large n, the normal approximation: k = 1000 of 100,000 at 95%:
  // 0.01 + 1.645 sqrt(0.01 x 0.99 / 1e5) ~ 0.01052 (the exact bound is a
  // little above it).
  const double big = ClopperPearsonUpper(1000, 100000, 0.95);
  EXPECT_GT(big, 0.01050);
  EXPECT_LT(big, 0.01056);
}

// A map whose probability is the score itself (Platt slope 1, intercept 0
// on logit s), so the counts below are over p directly.
CalibrationMap IdentityMap() {
  CalibrationMap map;
  map.method = Method::kPlatt;
  map.score_type = ScoreType::kMc;
  map.params = {1, 0};
  map.fit_base_rate = map.base_rate = 0.1;
  return map;
}

TEST(FalseMatchTest, ThresholdIsTheSmallestBinWhoseBoundPasses) {
  CalibrationMap map = IdentityMap();
  map.false_match_counts.assign(kFalseMatchBins, 0);
  // 10,000 non-matching pairs: 9,900 at p = 0.05, then 10 in each of the
  // bins of p = 0.50, 0.51, ..., 0.59.
  map.false_match_counts[50] = 9900;
  for (int b = 500; b < 510; ++b) map.false_match_counts[size_t(b)] = 10;
  ASSERT_TRUE(map.Validate().ok());
  double tau = 0;
  // Direct: the smallest bin b with CP(k_b, 10000, 0.95) <= 0.01, k_b the
  // pairs at bin b or above. k = 100 above 0.05: CP(100) > 0.01; k <= 80
  // (bins from 0.52 on) gives CP(80) ~ 0.0097.
  int want = -1;
  for (int b = 0; b < kFalseMatchBins && want < 0; ++b) {
    int64_t k = 0;
    for (int c = b; c < kFalseMatchBins; ++c) k += int64_t(map.false_match_counts[size_t(c)]);
    if (ClopperPearsonUpper(k, 10000, 0.95) <= 0.01) want = b;
  }
  ASSERT_TRUE(map.FalseMatchThreshold(0.01, 0.95, &tau).ok());
  EXPECT_DOUBLE_EQ(tau, double(want) / kFalseMatchBins);
  EXPECT_GT(tau, 0.5);
  EXPECT_LE(tau, 0.51);
  // A loose target: every pair clears threshold 0 (rate 1), so the first
  // passing bin is the one above the 9,900 pairs at p = 0.05.
  ASSERT_TRUE(map.FalseMatchThreshold(0.5, 0.95, &tau).ok());
  EXPECT_DOUBLE_EQ(tau, 0.051);
  // Encoded with the map.
  CalibrationMap back;
  ASSERT_TRUE(CalibrationMap::Decode(map.Encode(), &back).ok());
  EXPECT_EQ(back.false_match_counts, map.false_match_counts);
  EXPECT_EQ(back.Info().held_out_non_matches, 10000);
}

TEST(FalseMatchTest, BadInputIsRefusedNamingTheProblem) {
  CalibrationMap map = IdentityMap();
  double tau = 0;
  Status s = map.FalseMatchThreshold(0.01, 0.95, &tau);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("(conformal_fraction)"), std::string::npos) << s.ToString();
  map.false_match_counts.assign(kFalseMatchBins, 0);
  map.false_match_counts[3] = 100;
  for (double bad : {0.0, 1.0, -0.5, 2.0, std::nan("")}) {
    s = map.FalseMatchThreshold(bad, 0.95, &tau);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("(0, 1)"), std::string::npos) << s.ToString();
    s = map.FalseMatchThreshold(0.01, bad, &tau);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("confidence"), std::string::npos) << s.ToString();
  }
  // 0.01 at 95% needs n >= ln(0.05) / ln(0.99) = 298.07: 299 pairs.
  s = map.FalseMatchThreshold(0.01, 0.95, &tau);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("at least 299 held-out non-matching pairs, the calibration has 100"),
            std::string::npos)
      << s.ToString();
  map.false_match_counts[3] = 299;
  EXPECT_TRUE(map.FalseMatchThreshold(0.01, 0.95, &tau).ok());
  EXPECT_EQ(tau, 4.0 / kFalseMatchBins);  // above every held-out pair
  // Counts must be whole numbers >= 0, one per bin.
  map.false_match_counts[7] = 0.5;
  EXPECT_FALSE(map.Validate().ok());
  map.false_match_counts[7] = -1;
  EXPECT_FALSE(map.Validate().ok());
  map.false_match_counts.assign(10, 0);
  EXPECT_FALSE(map.Validate().ok());
}

// The effective sample: the same counts, once spread evenly over 100
// queries and once from a few ambiguous queries, which clear thresholds with
// many of their non-matching items at once. The second is less evidence, so
// its threshold is higher.
TEST(FalseMatchTest, PairsOfOneQueryCountAsLessEvidence) {
  // 100 queries of 1,000 non-matching pairs each; the pairs of bins 600 to
  // 699 (p in [0.6, 0.7)) number 10 per bin.
  auto with = [](bool clustered) {
    CalibrationMap map = IdentityMap();
    map.false_match_counts.assign(kFalseMatchBins, 0);
    map.false_match_kk.assign(kFalseMatchBins, 0);
    map.false_match_kn.assign(kFalseMatchBins, 0);
    map.false_match_queries = 100;
    map.false_match_nn = 100 * 1000.0 * 1000.0;
    map.false_match_counts[10] = 100000 - 1000;
    for (int b = 600; b < 700; ++b) map.false_match_counts[size_t(b)] = 10;
    // k_q(b) per query: spread, every query holds 1/100 of the pairs at or
    // above b; clustered, 5 queries hold them all.
    for (int b = 0; b < kFalseMatchBins; ++b) {
      double above = 0;
      for (int c = b; c < kFalseMatchBins; ++c) above += map.false_match_counts[size_t(c)];
      const double tail = std::min(above, 1000.0);  // the pairs of bins >= 600
      const double rest = above - tail;             // bin 10, spread always
      const int holders = clustered ? 5 : 100;
      const double kq_tail = tail / holders, kq_rest = rest / 100;
      // sum_q k_q^2 and sum_q k_q n_q over the 100 queries.
      map.false_match_kk[size_t(b)] =
          holders * (kq_tail + kq_rest) * (kq_tail + kq_rest) + (100 - holders) * kq_rest * kq_rest;
      map.false_match_kn[size_t(b)] = above * 1000;
    }
    EXPECT_TRUE(map.Validate().ok()) << map.Validate().ToString();
    return map;
  };
  double spread = 0, clustered = 0;
  ASSERT_TRUE(with(false).FalseMatchThreshold(0.005, 0.95, &spread).ok());
  ASSERT_TRUE(with(true).FalseMatchThreshold(0.005, 0.95, &clustered).ok());
  std::printf("threshold for 0.005: spread %.3f, clustered %.3f\n", spread, clustered);
  EXPECT_GT(clustered, spread + 0.02);
}

// The guarantee: non-matching pairs whose probability is p = Phi(z), z ~
// N(-2, 1), so the true false-match rate of threshold tau is
// 1 - Phi(Phi^-1(tau) + 2) exactly. Over 400 seeds of 3,000 held-out pairs
// each, the chosen threshold's true rate is at most the target in at least
// 95% of them (Clopper-Pearson is conservative, and the bins more so: about
// 98% here).
double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double NormalQuantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (NormalCdf(mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

TEST(FalseMatchTest, TheBoundHoldsInAtLeastNinetyFivePercentOfSeeds) {
  const double target = 0.02, confidence = 0.95;
  const int seeds = 400, pairs = 3000;
  int held = 0;
  double mean_rate = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(700 + uint64_t(seed));
    std::normal_distribution<double> z(-2, 1);
    CalibrationMap map = IdentityMap();
    map.false_match_counts.assign(kFalseMatchBins, 0);
    for (int i = 0; i < pairs; ++i) {
      const double p = NormalCdf(z(rng));
      map.false_match_counts[size_t(std::min(int(p * kFalseMatchBins), kFalseMatchBins - 1))] += 1;
    }
    double tau = 0;
    ASSERT_TRUE(map.FalseMatchThreshold(target, confidence, &tau).ok());
    const double rate = tau <= 0 ? 1 : 1 - NormalCdf(NormalQuantile(tau) + 2);
    mean_rate += rate / seeds;
    held += rate <= target ? 1 : 0;
  }
  std::printf("true false-match rate <= %.3f in %d of %d seeds (mean rate %.4f)\n", target, held,
              seeds, mean_rate);
  EXPECT_GE(held, int(std::ceil(0.95 * seeds)));
  // Not vacuous: the thresholds are near the target, not far above it.
  EXPECT_GT(mean_rate, 0.5 * target);
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb
