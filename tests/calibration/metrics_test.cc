#include "calibration/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace hedgedb {
namespace calibration {
namespace {

TEST(MetricsTest, HandComputedValues) {
  // Two bins of two: {0.1 (no), 0.3 (yes)} and {0.6 (no), 0.9 (yes)}.
  std::vector<ScoredPair> p = {{0.9, true}, {0.1, false}, {0.6, false}, {0.3, true}};
  CalibrationMetrics m;
  ASSERT_TRUE(MeasureCalibration(p, &m, 2).ok());
  EXPECT_EQ(m.count, 4);
  EXPECT_DOUBLE_EQ(m.positive_rate, 0.5);
  EXPECT_DOUBLE_EQ(m.mean_prob, 0.475);
  ASSERT_EQ(m.bins.size(), 2u);
  EXPECT_DOUBLE_EQ(m.bins[0].mean_prob, 0.2);
  EXPECT_DOUBLE_EQ(m.bins[0].fraction_positive, 0.5);
  EXPECT_EQ(m.bins[0].count, 2);
  EXPECT_DOUBLE_EQ(m.bins[1].mean_prob, 0.75);
  // |0.2 - 0.5| * 0.5 + |0.75 - 0.5| * 0.5
  EXPECT_NEAR(m.ece, 0.275, 1e-12);
  EXPECT_NEAR(m.brier, (0.01 + 0.01 + 0.36 + 0.49) / 4, 1e-12);
  EXPECT_NEAR(m.log_loss, -(std::log(0.9) + std::log(0.9) + std::log(0.4) + std::log(0.3)) / 4,
              1e-12);
}

TEST(MetricsTest, EqualMassBinsAndClippedLogLoss) {
  std::vector<ScoredPair> p;
  for (int i = 0; i < 1000; ++i) p.push_back({i / 999.0, i % 3 == 0});
  CalibrationMetrics m;
  ASSERT_TRUE(MeasureCalibration(p, &m).ok());
  ASSERT_EQ(m.bins.size(), size_t(kEceBins));
  int64_t total = 0;
  for (const ReliabilityBin& b : m.bins) {
    EXPECT_GE(b.count, 66);
    EXPECT_LE(b.count, 67);
    total += b.count;
  }
  EXPECT_EQ(total, 1000);
  for (size_t i = 1; i < m.bins.size(); ++i)
    EXPECT_GT(m.bins[i].mean_prob, m.bins[i - 1].mean_prob);

  // A certain mistake costs -ln(kLogLossClip), not infinity.
  ASSERT_TRUE(MeasureCalibration({{0.0, true}, {1.0, false}}, &m).ok());
  EXPECT_NEAR(m.log_loss, -std::log(kLogLossClip), 1e-6);
  EXPECT_DOUBLE_EQ(m.brier, 1.0);
  EXPECT_DOUBLE_EQ(m.ece, 1.0);
  EXPECT_EQ(m.bins.size(), 2u);  // fewer pairs than bins
}

TEST(MetricsTest, PerfectlyCalibratedPredictionsHaveSmallEce) {
  std::vector<ScoredPair> p;
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = double(state >> 11) / double(1ULL << 53);
    const double prob = (i % 1000) / 1000.0;
    p.push_back({prob, u < prob});
  }
  CalibrationMetrics m;
  ASSERT_TRUE(MeasureCalibration(p, &m).ok());
  EXPECT_LT(m.ece, 0.01);
}

TEST(MetricsTest, Errors) {
  CalibrationMetrics m;
  EXPECT_TRUE(MeasureCalibration({}, &m).IsInvalidArgument());
  EXPECT_TRUE(MeasureCalibration({{0.5, true}}, &m, 0).IsInvalidArgument());
  EXPECT_TRUE(MeasureCalibration({{1.5, true}}, &m).IsInvalidArgument());
  EXPECT_TRUE(MeasureCalibration({{std::numeric_limits<double>::quiet_NaN(), true}}, &m)
                  .IsInvalidArgument());
}

// The error-versus-reject area, by hand: confidences 0.9, 0.8, 0.7, 0.6
// with answers right, wrong, right, wrong: the errors of the 1, 2, 3, 4 most
// confident are 0, 1/2, 1/3, 1/2, area 1/3. Rejecting the errors first
// (oracle): 0, 0, 1/3, 1/2, area 5/24. A constant confidence says nothing:
// the overall error 1/2 at every cut.
TEST(MetricsTest, ErrorRejectAreaByHand) {
  const std::vector<bool> right = {true, false, true, false};
  EXPECT_NEAR(ErrorRejectArea({0.9, 0.8, 0.7, 0.6}, right), 1.0 / 3, 1e-15);
  EXPECT_NEAR(OracleErrorRejectArea(right), 5.0 / 24, 1e-15);
  EXPECT_NEAR(ErrorRejectArea({0.5, 0.5, 0.5, 0.5}, right), 0.5, 1e-15);
  // The order of the input does not matter; a tie between the two middle
  // ones counts their mean: errors 0, (1/2 + 0) / 2 ... at m = 2 the kept
  // part holds 1 + 1/2 right of 2, at m = 3 both: 0, 1/4, 1/3, 1/2.
  EXPECT_NEAR(ErrorRejectArea({0.6, 0.7, 0.7, 0.9}, {false, true, false, true}),
              (0 + 0.25 + 1.0 / 3 + 0.5) / 4, 1e-15);
  // Confidence the wrong way round is worse than none.
  EXPECT_GT(ErrorRejectArea({0.1, 0.9, 0.2, 0.8}, right), 0.5);
  EXPECT_TRUE(std::isnan(ErrorRejectArea({}, {})));
  EXPECT_TRUE(std::isnan(ErrorRejectArea({std::nan(""), 0.5}, {true, false})));
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb
