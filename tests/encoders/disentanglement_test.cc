// Modularity, explicitness and AUC on cases worked by hand.
#include "encoders/eval/disentanglement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace hedgedb::encoders {
namespace {

TEST(DisentanglementTest, FactorsOfCompositeLabels) {
  std::vector<int64_t> factors;
  ASSERT_TRUE(FactorsOfLabels({0, 7, 42, 99}, {10, 10}, &factors).ok());
  EXPECT_EQ(factors, (std::vector<int64_t>{0, 0, 0, 7, 4, 2, 9, 9}));
  ASSERT_TRUE(FactorsOfLabels({5}, {2, 3}, &factors).ok());  // mixed radix: 5 = 1 * 3 + 2
  EXPECT_EQ(factors, (std::vector<int64_t>{1, 2}));
  const Status s = FactorsOfLabels({100}, {10, 10}, &factors);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("label 100"), std::string::npos) << s.ToString();
}

// Two binary factors, the four combinations (f0, f1) once each.
// Dimension 0 = f0: it informs about f0 only (m = (ln 2, 0)): delta 0,
// modularity 1. Dimension 1 = f0 + 2 f1 (four distinct values): it
// determines both factors (m = (ln 2, ln 2)), template (ln 2, 0),
// delta = (ln 2)^2 / ((ln 2)^2 (2 - 1)) = 1: modularity 0. Mean 0.5.
TEST(DisentanglementTest, ModularityByHand) {
  const std::vector<int64_t> factors = {0, 0, 0, 1, 1, 0, 1, 1};
  const std::vector<float> code = {0, 0, 0, 2, 1, 1, 1, 3};
  ModularityResult r;
  ASSERT_TRUE(Modularity({code.data(), 4, 2}, factors, {2, 2}, 20, &r).ok());
  EXPECT_NEAR(r.modularity, 0.5, 1e-12);
  EXPECT_EQ(r.dimensions_scored, 2);
  // Dimension 1 alone: 0. A constant dimension informs about nothing and is
  // left out rather than counted as modular.
  const std::vector<float> mixed_and_constant = {0, 5, 2, 5, 1, 5, 3, 5};
  ASSERT_TRUE(Modularity({mixed_and_constant.data(), 4, 2}, factors, {2, 2}, 20, &r).ok());
  EXPECT_NEAR(r.modularity, 0.0, 1e-12);
  EXPECT_EQ(r.dimensions_scored, 1);
  // One factor has no N - 1; too few bins; factor values out of range.
  EXPECT_TRUE(Modularity({code.data(), 4, 2}, {0, 1, 0, 1}, {2}, 20, &r).IsInvalidArgument());
  EXPECT_TRUE(Modularity({code.data(), 4, 2}, factors, {2, 2}, 1, &r).IsInvalidArgument());
  EXPECT_TRUE(Modularity({code.data(), 4, 2}, {0, 0, 0, 2, 1, 0, 1, 1}, {2, 2}, 20, &r)
                  .IsInvalidArgument());
  const std::vector<float> nan_code = {0, 0, std::nanf(""), 2, 1, 1, 1, 3};
  EXPECT_TRUE(Modularity({nan_code.data(), 4, 2}, factors, {2, 2}, 20, &r).IsInvalidArgument());
}

TEST(DisentanglementTest, RocAucByHand) {
  double auc = 0;
  // Positives at 0.8 and 0.4, negatives at 0.6 and 0.2: of the four
  // positive-negative pairs, three are ordered right.
  ASSERT_TRUE(RocAuc({0.8, 0.4, 0.6, 0.2}, {1, 1, 0, 0}, &auc).ok());
  EXPECT_DOUBLE_EQ(auc, 0.75);
  ASSERT_TRUE(RocAuc({0.5, 0.5}, {1, 0}, &auc).ok());  // a tie counts one half
  EXPECT_DOUBLE_EQ(auc, 0.5);
  EXPECT_TRUE(RocAuc({0.5, 0.4}, {1, 1}, &auc).IsInvalidArgument());
}

// A code that is the factors themselves (plus a little noise) is linearly
// explicit: every one-versus-rest AUC is near 1. A code of pure noise is not:
// near 0.5. 3 x 4 factor values, items drawn at random.
TEST(DisentanglementTest, ExplicitnessOfReadableAndOfNoiseCodes) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> value(0, 3);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  const auto make = [&](int n, bool readable, std::vector<float>* code,
                        std::vector<int64_t>* factors) {
    for (int i = 0; i < n; ++i) {
      const int a = value(rng) % 3, b = value(rng);
      factors->insert(factors->end(), {a, b});
      // One-hot of both factors: one-versus-rest is linear in it.
      for (int k = 0; k < 3; ++k) code->push_back((readable ? (a == k) : 0) + noise(rng));
      for (int k = 0; k < 4; ++k) code->push_back((readable ? (b == k) : 0) + noise(rng));
    }
  };
  for (const bool readable : {true, false}) {
    std::vector<float> train, test;
    std::vector<int64_t> train_f, test_f;
    make(400, readable, &train, &train_f);
    make(300, readable, &test, &test_f);
    ExplicitnessResult r;
    const Status s = Explicitness({train.data(), 400, 7}, train_f, {test.data(), 300, 7}, test_f,
                                  {3, 4}, ExplicitnessOptions(), &r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.values_scored, 7);
    ASSERT_EQ(r.per_factor.size(), 2u);
    if (readable) {
      EXPECT_GT(r.explicitness, 0.99);
    } else {
      EXPECT_NEAR(r.explicitness, 0.5, 0.06);
    }
  }
  std::vector<float> code(8, 0.0f);
  ExplicitnessResult r;
  EXPECT_TRUE(Explicitness({code.data(), 4, 2}, {0, 0, 1, 1, 0, 1, 1, 0}, {code.data(), 4, 2},
                           {0, 0, 1, 1, 0, 1, 1, 0}, {}, ExplicitnessOptions(), &r)
                  .IsInvalidArgument());
}

}  // namespace
}  // namespace hedgedb::encoders
