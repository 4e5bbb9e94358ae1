#include "report/uncertainty_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/random.h"

namespace hedgedb {
namespace report {
namespace {

double Uniform(uint64_t* state) { return double(SplitMix64(state) >> 11) * 0x1.0p-53; }

TEST(ReportUncertaintyCurveTest, HandComputed) {
  // Sorted by uncertainty: 0.1 right, 0.2 right, 0.3 wrong, 0.4 wrong.
  std::vector<QueryOutcome> q = {{0.4, false}, {0.1, true}, {0.3, false}, {0.2, true}};
  std::vector<UncertaintyPoint> c;
  ASSERT_TRUE(UncertaintyCurve(q, &c, {0.75, 3}).ok());
  ASSERT_EQ(c.size(), 4u);
  const double kept[] = {4, 3, 2, 1}, acc[] = {0.5, 2.0 / 3, 1, 1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c[size_t(i)].kept, kept[i]);
    EXPECT_DOUBLE_EQ(c[size_t(i)].fraction_dropped, 0.25 * i);
    EXPECT_DOUBLE_EQ(c[size_t(i)].accuracy, acc[i]);
  }
}

TEST(ReportUncertaintyCurveTest, PerfectUncertaintyRisesToOne) {
  // 60% right; the uncertainty is 1 exactly on the errors.
  std::vector<QueryOutcome> q;
  for (int i = 0; i < 1000; ++i) q.push_back({i % 5 < 3 ? 0.0 : 1.0, i % 5 < 3});
  std::vector<UncertaintyPoint> c;
  ASSERT_TRUE(UncertaintyCurve(q, &c).ok());
  ASSERT_EQ(c.size(), 19u);
  EXPECT_DOUBLE_EQ(c.front().accuracy, 0.6);
  for (size_t i = 1; i < c.size(); ++i) EXPECT_GE(c[i].accuracy, c[i - 1].accuracy);
  for (const UncertaintyPoint& p : c) {
    if (p.fraction_dropped >= 0.4 - 1e-12) {
      EXPECT_DOUBLE_EQ(p.accuracy, 1.0);
    }
    // Before that, only errors were dropped: the oracle's accuracy.
    EXPECT_NEAR(p.accuracy, std::min(1.0, 600.0 / double(p.kept)), 1e-12);
  }
  std::vector<UncertaintyPoint> oracle;
  ASSERT_TRUE(OracleUncertaintyCurve(q, &oracle).ok());
  ASSERT_EQ(oracle.size(), c.size());
  for (size_t i = 0; i < c.size(); ++i) EXPECT_DOUBLE_EQ(oracle[i].accuracy, c[i].accuracy);
}

TEST(ReportUncertaintyCurveTest, RandomUncertaintyIsFlatWithinNoise) {
  uint64_t state = 42;
  std::vector<QueryOutcome> q;
  int correct = 0;
  for (int i = 0; i < 20000; ++i) {
    const bool right = Uniform(&state) < 0.7;
    correct += right;
    q.push_back({Uniform(&state), right});
  }
  const double base = correct / 20000.0;
  std::vector<UncertaintyPoint> c;
  ASSERT_TRUE(UncertaintyCurve(q, &c).ok());
  for (const UncertaintyPoint& p : c) {
    // The kept queries are a random subset: binomial noise around the base
    // rate, with the finite-population correction.
    const double n = double(p.kept);
    const double sd = std::sqrt(base * (1 - base) / n * (1 - n / 20000.0));
    EXPECT_NEAR(p.accuracy, base, 4 * sd + 1e-12) << "dropped " << p.fraction_dropped;
  }
}

TEST(ReportUncertaintyCurveTest, TiesCountAsTheirMeanSoConstantUncertaintyIsFlat) {
  std::vector<QueryOutcome> q;
  // Errors listed first: an order-dependent tie break would favour them.
  for (int i = 0; i < 300; ++i) q.push_back({0.5, i >= 100});
  std::vector<UncertaintyPoint> c;
  ASSERT_TRUE(UncertaintyCurve(q, &c).ok());
  for (const UncertaintyPoint& p : c) EXPECT_NEAR(p.accuracy, 200.0 / 300, 1e-12);

  // A tie group straddling the cut: 0.1 right; 0.5 x4, two right; 0.9 wrong.
  q = {{0.1, true}, {0.5, true}, {0.5, false}, {0.5, true}, {0.5, false}, {0.9, false}};
  ASSERT_TRUE(UncertaintyCurve(q, &c, {0.5, 1}).ok());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].kept, 3);
  EXPECT_DOUBLE_EQ(c[1].accuracy, (1 + 2 * 0.5) / 3);
}

TEST(ReportUncertaintyCurveTest, KeepsAtLeastOneQuery) {
  std::vector<UncertaintyPoint> c;
  ASSERT_TRUE(UncertaintyCurve({{0.3, true}, {0.7, false}}, &c, {0.9, 1}).ok());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].kept, 1);
  EXPECT_DOUBLE_EQ(c[1].accuracy, 1.0);
}

TEST(ReportUncertaintyCurveTest, BadInputIsAnErrorAndLeavesTheOutputAlone) {
  std::vector<UncertaintyPoint> c = {{0.5, 7, 0.25}};
  EXPECT_TRUE(UncertaintyCurve({}, &c).IsInvalidArgument());
  const Status nan =
      UncertaintyCurve({{0.1, true}, {std::numeric_limits<double>::quiet_NaN(), false}}, &c);
  EXPECT_TRUE(nan.IsInvalidArgument());
  EXPECT_NE(nan.message().find("query 1"), std::string::npos) << nan.message();
  EXPECT_TRUE(UncertaintyCurve({{0.1, true}}, &c, {1.0, 10}).IsInvalidArgument());
  EXPECT_TRUE(UncertaintyCurve({{0.1, true}}, &c, {-0.1, 10}).IsInvalidArgument());
  EXPECT_TRUE(UncertaintyCurve({{0.1, true}}, &c, {0.5, 0}).IsInvalidArgument());
  EXPECT_TRUE(OracleUncertaintyCurve({}, &c).IsInvalidArgument());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kept, 7);
}

}  // namespace
}  // namespace report
}  // namespace hedgedb
