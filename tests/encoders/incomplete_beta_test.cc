#include "encoders/losses/incomplete_beta.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace hedgedb::encoders {
namespace {

// I_x(a, n) for integer n, summed independently of the continued fraction:
// I_x(a, n) = x^a * sum_{j<n} (a)_j / j! * (1-x)^j.
double IncompleteBetaIntegerB(double x, double a, int n) {
  double term = 1.0, sum = 0.0;
  for (int j = 0; j < n; ++j) {
    sum += term;
    term *= (a + j) / (j + 1) * (1.0 - x);
  }
  return std::pow(x, a) * sum;
}

TEST(IncompleteBetaTest, KnownValues) {
  for (double a : {0.5, 1.0, 2.5, 7.0, 40.0}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(0.5, a, a), 0.5, 1e-13) << "a=" << a;
  }
  for (double x : {0.0, 0.1, 0.37, 0.5, 0.9, 1.0}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(x, 1.0, 1.0), x, 1e-14);
    EXPECT_NEAR(RegularizedIncompleteBeta(x, 3.5, 1.0), std::pow(x, 3.5), 1e-13);
    EXPECT_NEAR(RegularizedIncompleteBeta(x, 1.0, 4.0), 1.0 - std::pow(1.0 - x, 4.0), 1e-13);
    // Arcsine law: I_x(1/2, 1/2) = (2/pi) asin(sqrt(x)).
    EXPECT_NEAR(RegularizedIncompleteBeta(x, 0.5, 0.5), 2.0 / M_PI * std::asin(std::sqrt(x)),
                1e-13);
  }
  // Tabulated: I_0.3(2, 3) = 0.3483 (binomial tail, exactly 0.3483).
  EXPECT_NEAR(RegularizedIncompleteBeta(0.3, 2.0, 3.0), 0.3483, 1e-13);
  // The F-statistic case a = 1/2 with integer b (even degrees of freedom),
  // on both sides of the continued fraction's switch point.
  for (int n : {1, 2, 5, 17, 60}) {
    for (double x : {1e-6, 0.01, 0.2, 0.6, 0.95, 0.99999}) {
      EXPECT_NEAR(RegularizedIncompleteBeta(x, 0.5, n), IncompleteBetaIntegerB(x, 0.5, n), 1e-12)
          << "x=" << x << " n=" << n;
    }
  }
  // Symmetry I_x(a, b) = 1 - I_{1-x}(b, a) for non-integer shapes.
  EXPECT_NEAR(RegularizedIncompleteBeta(0.42, 2.7, 0.8),
              1.0 - RegularizedIncompleteBeta(0.58, 0.8, 2.7), 1e-13);
  // Out of domain.
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(1.5, 1.0, 1.0)));
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(0.5, 0.0, 1.0)));
}

TEST(IncompleteBetaTest, TensorForwardMatchesScalarAndBroadcasts) {
  torch::Tensor x = torch::tensor({{0.1, 0.5, 0.9}, {0.3, 0.3, 0.3}}, torch::kDouble);
  torch::Tensor a = torch::tensor(0.5, torch::kDouble);
  torch::Tensor b = torch::tensor({{1.5}, {3.0}}, torch::kDouble);
  torch::Tensor out = RegularizedIncompleteBeta(x, a, b);
  ASSERT_EQ(out.sizes(), x.sizes());
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_DOUBLE_EQ(out[i][j].item<double>(),
                       RegularizedIncompleteBeta(x[i][j].item<double>(), 0.5, i == 0 ? 1.5 : 3.0));
    }
  }
  // Float in, float out (computed in double inside).
  torch::Tensor xf = torch::tensor({0.3f});
  torch::Tensor of = RegularizedIncompleteBeta(xf, torch::tensor(2.0), torch::tensor(3.0));
  EXPECT_EQ(of.scalar_type(), torch::kFloat);
  EXPECT_NEAR(of.item<float>(), 0.3483f, 1e-6);
}

TEST(IncompleteBetaTest, GradientMatchesClosedFormAndFiniteDifferences) {
  const double a = 0.5, b = 3.5;
  torch::Tensor x = torch::tensor({0.05, 0.3, 0.62, 0.97}, torch::kDouble).requires_grad_(true);
  torch::Tensor weights = torch::tensor({1.0, -2.0, 0.5, 3.0}, torch::kDouble);
  torch::Tensor y = (RegularizedIncompleteBeta(x, torch::tensor(a, torch::kDouble),
                                               torch::tensor(b, torch::kDouble)) *
                     weights)
                        .sum();
  y.backward();
  const double log_beta = std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b);
  for (int i = 0; i < 4; ++i) {
    const double xi = x[i].item<double>();
    const double closed = std::exp((a - 1) * std::log(xi) + (b - 1) * std::log1p(-xi) - log_beta);
    const double h = 1e-6;
    const double numeric =
        (RegularizedIncompleteBeta(xi + h, a, b) - RegularizedIncompleteBeta(xi - h, a, b)) /
        (2 * h);
    const double w = weights[i].item<double>();
    EXPECT_NEAR(x.grad()[i].item<double>(), w * closed, 1e-12 * std::fabs(w * closed) + 1e-14);
    EXPECT_NEAR(closed, numeric, 1e-6 * std::max(1.0, std::fabs(closed)));
  }
}

TEST(IncompleteBetaTest, GradientFlowsInFloatAndNotIntoShapes) {
  torch::Tensor x = torch::tensor({0.25f}).requires_grad_(true);
  torch::Tensor a = torch::tensor(2.0f).requires_grad_(true);
  torch::Tensor y = RegularizedIncompleteBeta(x, a, torch::tensor(2.0f));
  y.sum().backward();
  // I_x(2, 2) = 3x^2 - 2x^3, derivative 6x(1 - x) = 1.125 at x = 1/4.
  EXPECT_NEAR(y.item<float>(), 3 * 0.0625 - 2 * 0.015625, 1e-6);
  EXPECT_NEAR(x.grad().item<float>(), 1.125f, 1e-5);
  EXPECT_FALSE(a.grad().defined());
}

}  // namespace
}  // namespace hedgedb::encoders
