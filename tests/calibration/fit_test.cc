#include "calibration/fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "calibration/metrics.h"
#include "synthetic.h"

namespace hedgedb {
namespace calibration {
namespace {

using testing::Population;

constexpr size_t kPairs = 100000;

struct Recovery {
  double ece = 0;             // on fresh pairs
  double mean_abs_error = 0;  // |Apply(s) - true P(s)| over fresh scores
};

Recovery Measure(const CalibrationMap& map, const Population& pop, uint64_t seed) {
  std::vector<ScoredPair> fresh = testing::Sample(pop, kPairs, seed);
  Recovery r;
  for (ScoredPair& pair : fresh) {
    const double p = map.Apply(pair.score);
    r.mean_abs_error += std::fabs(p - pop.true_prob(pair.score));
    pair.score = p;
  }
  r.mean_abs_error /= double(fresh.size());
  CalibrationMetrics metrics;
  EXPECT_TRUE(MeasureCalibration(fresh, &metrics).ok());
  r.ece = metrics.ece;
  return r;
}

FitOptions OptionsFor(const Population& pop) {
  FitOptions options;
  options.score_type = pop.probability_score ? ScoreType::kMc : ScoreType::kL2;
  return options;
}

void PrintReport(const char* name, const CalibrationMap& map, const Recovery& r) {
  std::printf("[%s] chose %s; fresh ECE %.4f, mean |p - true| %.4f; %s\n", name,
              MethodName(map.method), r.ece, r.mean_abs_error, map.report.reason.c_str());
  for (const CandidateReport& c : map.report.candidates) {
    std::printf("    %-8s held-out ECE %.4f  Brier %.5f  log loss %.5f\n", MethodName(c.method),
                c.ece, c.brier, c.log_loss);
  }
  if (map.report.has_raw) {
    std::printf("    raw      ECE %.4f  Brier %.5f  log loss %.5f\n", map.report.raw_ece,
                map.report.raw_brier, map.report.raw_log_loss);
  }
}

TEST(SyntheticPopulationTest, BaseRatesAreOneToFivePercent) {
  for (const Population& pop :
       {testing::LogisticPopulation(), testing::StepPopulation(), testing::UnboundedPopulation()}) {
    const double rate = testing::BaseRate(pop, kPairs, 99);
    EXPECT_GT(rate, 0.01);
    EXPECT_LT(rate, 0.05);
  }
}

TEST(FitTest, EachMethodRecoversTheCurveItCanRepresent) {
  const Population logistic = testing::LogisticPopulation(), step = testing::StepPopulation();
  const std::vector<ScoredPair> logistic_pairs = testing::Sample(logistic, kPairs, 1);
  const std::vector<ScoredPair> step_pairs = testing::Sample(step, kPairs, 2);
  const FitOptions options = OptionsFor(logistic);
  CalibrationMap platt, beta, isotonic_logistic, isotonic_step;
  ASSERT_TRUE(FitPlatt(logistic_pairs, options, &platt).ok());
  ASSERT_TRUE(FitBeta(logistic_pairs, options, &beta).ok());
  ASSERT_TRUE(FitIsotonic(logistic_pairs, options, &isotonic_logistic).ok());
  ASSERT_TRUE(FitIsotonic(step_pairs, options, &isotonic_step).ok());
  // Platt on logit s recovers logit P = 1.3 logit s - 3.5.
  EXPECT_NEAR(platt.params[0], 1.3, 0.1);
  EXPECT_NEAR(platt.params[1], -3.5, 0.3);
  struct Case {
    const char* name;
    const CalibrationMap* map;
    const Population* pop;
  };
  for (const Case& c :
       {Case{"platt/logistic", &platt, &logistic}, Case{"beta/logistic", &beta, &logistic},
        Case{"isotonic/logistic", &isotonic_logistic, &logistic},
        Case{"isotonic/step", &isotonic_step, &step}}) {
    const Recovery r = Measure(*c.map, *c.pop, 1000);
    std::printf("[%s] fresh ECE %.4f, mean |p - true| %.4f\n", c.name, r.ece, r.mean_abs_error);
    EXPECT_LT(r.ece, 0.02) << c.name;
    EXPECT_LT(r.mean_abs_error, 0.01) << c.name;
  }
}

// FitCalibration on kPairs pairs of the population; the map must recover the
// true probabilities on fresh pairs.
CalibrationMap FitAndCheck(const char* name, const Population& pop, uint64_t seed) {
  CalibrationMap map;
  EXPECT_TRUE(FitCalibration(testing::Sample(pop, kPairs, seed), OptionsFor(pop), &map).ok());
  const Recovery r = Measure(map, pop, 1000 + seed);
  PrintReport(name, map, r);
  EXPECT_EQ(map.report.chosen, map.method);
  EXPECT_EQ(map.num_pairs, int64_t(kPairs));
  EXPECT_LT(r.ece, 0.02) << name;
  EXPECT_LT(r.mean_abs_error, 0.01) << name;
  return map;
}

TEST(FitCalibrationTest, ChoosesPlattForALogisticCurve) {
  const CalibrationMap map = FitAndCheck("logistic", testing::LogisticPopulation(), 3);
  // Platt is exact here and beta contains it: a tie, which Platt wins.
  EXPECT_EQ(map.method, Method::kPlatt);
  EXPECT_EQ(map.report.candidates.size(), 3u);
  EXPECT_TRUE(map.report.has_raw);
}

TEST(FitCalibrationTest, ChoosesIsotonicForAStaircase) {
  const CalibrationMap map = FitAndCheck("step", testing::StepPopulation(), 4);
  EXPECT_EQ(map.method, Method::kIsotonic);
}

TEST(FitCalibrationTest, UnboundedScoresUsePlattOnTheScoreItself) {
  const CalibrationMap map = FitAndCheck("unbounded", testing::UnboundedPopulation(), 5);
  EXPECT_EQ(map.score_type, ScoreType::kL2);
  EXPECT_EQ(map.report.candidates.size(), 2u);  // no beta for unbounded scores
  EXPECT_FALSE(map.report.has_raw);
  EXPECT_EQ(map.method, Method::kPlatt);
  EXPECT_NEAR(map.params[0], 2.0, 0.15);
}

TEST(FitCalibrationTest, PriorShiftCalibratesBalancedPairsForThePopulation) {
  for (const Population& pop : {testing::LogisticPopulation(), testing::StepPopulation()}) {
    const std::vector<ScoredPair> balanced = testing::SampleBalanced(pop, 20000, 6);
    const double pi = testing::BaseRate(pop, 1000000, 7);
    FitOptions options = OptionsFor(pop);
    CalibrationMap unshifted, shifted;
    ASSERT_TRUE(FitCalibration(balanced, options, &unshifted).ok());
    options.target_base_rate = pi;
    ASSERT_TRUE(FitCalibration(balanced, options, &shifted).ok());
    EXPECT_DOUBLE_EQ(shifted.fit_base_rate, 0.5);
    EXPECT_DOUBLE_EQ(shifted.base_rate, pi);
    const Recovery before = Measure(unshifted, pop, 1006), after = Measure(shifted, pop, 1006);
    std::printf("[prior shift, %s] pi %.4f: ECE %.4f without the shift, %.4f with it\n",
                MethodName(shifted.method), pi, before.ece, after.ece);
    EXPECT_GT(before.ece, 0.1);  // calibrated for a 50% population, not this one
    EXPECT_LT(after.ece, 0.02);
    EXPECT_LT(after.mean_abs_error, 0.01);
  }
}

TEST(FitCalibrationTest, SplitSeedMakesItDeterministic) {
  const std::vector<ScoredPair> pairs = testing::Sample(testing::StepPopulation(), 5000, 8);
  FitOptions options;
  options.split_seed = 42;
  CalibrationMap a, b;
  ASSERT_TRUE(FitCalibration(pairs, options, &a).ok());
  ASSERT_TRUE(FitCalibration(pairs, options, &b).ok());
  EXPECT_EQ(a.Encode(), b.Encode());
  EXPECT_EQ(a.report.split_seed, 42u);
}

// Scores that do not predict matching at all still give a monotone map: the
// base rate everywhere (Platt's slope is held at 0, never negative).
TEST(FitCalibrationTest, AntiCorrelatedScoresGiveTheBaseRate) {
  std::vector<ScoredPair> pairs;
  for (int i = 0; i < 1000; ++i) pairs.push_back({i / 1000.0, i < 100});
  CalibrationMap map;
  ASSERT_TRUE(FitPlatt(pairs, FitOptions(), &map).ok());
  EXPECT_EQ(map.params[0], 0.0);
  EXPECT_NEAR(map.Apply(0.9), 0.1, 1e-9);
  ASSERT_TRUE(FitBeta(pairs, FitOptions(), &map).ok());
  EXPECT_NEAR(map.Apply(0.2), map.Apply(0.8), 0.02);
}

TEST(FitErrorsTest, NamesTheProblem) {
  FitOptions options;
  CalibrationMap map;
  auto fit_error = [&](const std::vector<ScoredPair>& pairs) {
    Status s = FitCalibration(pairs, options, &map);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    for (auto* fit : {&FitPlatt, &FitBeta, &FitIsotonic}) {
      EXPECT_EQ((*fit)(pairs, options, &map).message(), s.message());
    }
    return s.message();
  };
  EXPECT_NE(fit_error({}).find("no labelled pairs"), std::string::npos);

  std::vector<ScoredPair> one_class(500, ScoredPair{0.3, false});
  EXPECT_NE(fit_error(one_class).find("only one class: all 500 pairs are non-matches"),
            std::string::npos);
  for (auto& p : one_class) p.is_match = true;
  EXPECT_NE(fit_error(one_class).find("are matches"), std::string::npos);

  std::vector<ScoredPair> few;
  for (int i = 0; i < 57; ++i) few.push_back({i / 57.0, i % 2 == 0});
  EXPECT_NE(fit_error(few).find("57 labelled pairs, calibration needs at least 200"),
            std::string::npos);

  std::vector<ScoredPair> rare;
  for (int i = 0; i < 1000; ++i) rare.push_back({i / 1000.0, i % 100 == 0});
  EXPECT_NE(fit_error(rare).find("10 matching and 990 non-matching pairs, calibration needs at "
                                 "least 20 of each"),
            std::string::npos);

  std::vector<ScoredPair> nan_score = testing::Sample(testing::StepPopulation(), 1000, 9);
  nan_score[17].score = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(fit_error(nan_score).find("score of pair 17 is NaN"), std::string::npos);
  nan_score[17].score = 1.5;
  EXPECT_NE(fit_error(nan_score).find("score of pair 17 is 1.5"), std::string::npos);
  nan_score[17].score = 0.5;

  options.target_base_rate = 1.0;
  EXPECT_NE(fit_error(nan_score).find("target base rate"), std::string::npos);
  options.target_base_rate = 0;
  options.score_type = ScoreType::kDefault;
  EXPECT_NE(fit_error(nan_score).find("resolved score type"), std::string::npos);

  // Unbounded scores may be any finite real, but beta needs probabilities.
  options.score_type = ScoreType::kMls;
  for (auto& p : nan_score) p.score = -100 * p.score;
  EXPECT_TRUE(FitCalibration(nan_score, options, &map).ok());
  EXPECT_TRUE(FitBeta(nan_score, options, &map).IsInvalidArgument());
}

TEST(FitErrorsTest, FailedFitLeavesTheMapUnchanged) {
  CalibrationMap map;
  ASSERT_TRUE(
      FitCalibration(testing::Sample(testing::StepPopulation(), 2000, 10), FitOptions(), &map)
          .ok());
  const std::string before = map.Encode();
  EXPECT_FALSE(FitCalibration({{0.5, true}}, FitOptions(), &map).ok());
  EXPECT_EQ(map.Encode(), before);
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb
