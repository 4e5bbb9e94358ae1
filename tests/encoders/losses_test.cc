// Every loss against an independent plain-double reference on a tiny batch,
// and autograd gradients against central finite differences (double tensors).
#include "encoders/losses/losses.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <map>
#include <vector>

namespace hedgedb::encoders {
namespace {

constexpr double kLog2Pi = 1.8378770664093454835606594728112;

torch::TensorOptions Double() { return torch::TensorOptions().dtype(torch::kDouble); }

void UseFewThreads() { torch::set_num_threads(2); }

// The machine is shared: keep every test in this binary to two threads.
class TorchThreads : public ::testing::Environment {
 public:
  void SetUp() override { UseFewThreads(); }
};
const auto* const kTorchThreads = ::testing::AddGlobalTestEnvironment(new TorchThreads);

// Flattened values of a tensor as doubles.
std::vector<double> Values(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

std::vector<int64_t> Labels(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

double Sigmoid(double t) { return 1.0 / (1.0 + std::exp(-t)); }

double LogNormal(double x, double mean, double var) {
  return -0.5 * ((x - mean) * (x - mean) / var + std::log(var) + kLog2Pi);
}

using LossFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// Central differences (h = 1e-6) for every element of every input against
// autograd's gradient of the scalar f.
void ExpectGradientsMatchFiniteDifferences(const LossFn& f, std::vector<torch::Tensor> inputs,
                                           double tolerance = 1e-6) {
  for (auto& t : inputs) t = t.detach().clone().requires_grad_(true);
  torch::Tensor y = f(inputs);
  std::vector<torch::Tensor> grads =
      torch::autograd::grad({y}, inputs, /*grad_outputs=*/{}, /*retain_graph=*/false,
                            /*create_graph=*/false, /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  const double h = 1e-6;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t n = inputs[i].numel();
    std::vector<double> analytic =
        grads[i].defined() ? Values(grads[i]) : std::vector<double>(n, 0.0);
    for (int64_t j = 0; j < n; ++j) {
      auto shifted = [&](double delta) {
        std::vector<torch::Tensor> copy;
        for (auto& t : inputs) copy.push_back(t.detach().clone());
        copy[i].view(-1)[j] += delta;
        return f(copy).item<double>();
      };
      const double numeric = (shifted(h) - shifted(-h)) / (2 * h);
      EXPECT_NEAR(analytic[j], numeric, tolerance * std::max(1.0, std::fabs(numeric)))
          << "input " << i << " element " << j;
    }
  }
}

// ---------------------------------------------------------------------------
// Soft contrastive
// ---------------------------------------------------------------------------

double ReferenceSoftContrastive(const std::vector<double>& z1, const std::vector<double>& z2,
                                const std::vector<int64_t>& match, int64_t dim, double a,
                                double b) {
  double total = 0;
  const size_t batch = match.size();
  for (size_t i = 0; i < batch; ++i) {
    double sq = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const double diff = z1[i * dim + d] - z2[i * dim + d];
      sq += diff * diff;
    }
    const double p = Sigmoid(-a * std::sqrt(sq) + b);
    total += match[i] ? -std::log(p) : -std::log(1 - p);
  }
  return total / batch;
}

TEST(SoftContrastiveLossTest, MatchesReferenceAndGradients) {
  UseFewThreads();
  torch::manual_seed(1);
  torch::Tensor z1 = torch::randn({4, 3}, Double());
  torch::Tensor z2 = torch::randn({4, 3}, Double());
  torch::Tensor match = torch::tensor({1, 0, 1, 0}, torch::kLong);
  torch::Tensor a = torch::tensor(1.3, Double()), b = torch::tensor(0.4, Double());
  LossOutput out = SoftContrastiveLoss(z1, z2, match, a, b);
  const double expected =
      ReferenceSoftContrastive(Values(z1), Values(z2), Labels(match), 3, 1.3, 0.4);
  EXPECT_NEAR(out.loss.item<double>(), expected, 1e-10);
  EXPECT_NEAR(out.terms.at("nll"), expected, 1e-10);

  // A match pulls together, a non-match pushes apart: swapping labels must change the loss.
  LossOutput swapped = SoftContrastiveLoss(z1, z2, 1 - match, a, b);
  EXPECT_GT(std::fabs(swapped.loss.item<double>() - out.loss.item<double>()), 1e-3);

  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return SoftContrastiveLoss(in[0], in[1], match, in[2], in[3]).loss;
      },
      {z1, z2, a, b});
}

TEST(SoftContrastiveLossTest, IdenticalPointsHaveFiniteGradient) {
  torch::Tensor z = torch::randn({2, 3}, Double()).requires_grad_(true);
  LossOutput out = SoftContrastiveLoss(z, z.detach(), torch::tensor({1, 0}),
                                       torch::tensor(1.0, Double()), torch::tensor(0.0, Double()));
  out.loss.backward();
  EXPECT_TRUE(torch::isfinite(z.grad()).all().item<bool>());
}

// Four pairs worked by hand, margin 2: a match at distance 5 costs 5^2 = 25;
// a non-match at distance 1 costs (2 - 1)^2 = 1, one at distance 3 costs 0
// (beyond the margin); a match at distance 0.5 costs 0.25. Mean 6.5625.
TEST(ContrastiveLossTest, MatchesHandComputedValues) {
  torch::Tensor z1 = torch::tensor({0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0}, Double()).view({4, 2});
  torch::Tensor z2 = torch::tensor({3.0, 4.0, 0.6, 0.8, 1.0, 4.0, 0.0, 0.5}, Double()).view({4, 2});
  torch::Tensor match = torch::tensor({1, 0, 0, 1}, torch::kLong);
  LossOutput out = ContrastiveLoss(z1, z2, match, 2.0);
  EXPECT_NEAR(out.loss.item<double>(), 6.5625, 1e-9);
  EXPECT_NEAR(out.terms.at("loss"), 6.5625, 1e-9);
  EXPECT_DOUBLE_EQ(out.terms.at("active_negatives"), 0.5);  // one of the two non-matches
  // A larger margin reaches the far non-match too: (4 - 3)^2 = 1 more, and
  // the near one costs (4 - 1)^2 = 9.
  EXPECT_NEAR(ContrastiveLoss(z1, z2, match, 4.0).loss.item<double>(), (25 + 9 + 1 + 0.25) / 4,
              1e-9);
}

TEST(ContrastiveLossTest, GradientsMatchFiniteDifferencesAndBadMarginIsRefused) {
  UseFewThreads();
  torch::manual_seed(3);
  torch::Tensor z1 = torch::randn({6, 3}, Double());
  torch::Tensor z2 = torch::randn({6, 3}, Double());
  torch::Tensor match = torch::tensor({1, 0, 1, 0, 0, 1}, torch::kLong);
  // Margin 2.5: random N(0, I) pairs in 3-D sit on both sides of it.
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return ContrastiveLoss(in[0], in[1], match, 2.5).loss;
      },
      {z1, z2});
  EXPECT_THROW(ContrastiveLoss(z1, z2, match, 0.0), c10::Error);
  EXPECT_THROW(ContrastiveLoss(z1, z2, match, std::nan("")), c10::Error);
  EXPECT_THROW(ContrastiveLoss(z1, z2.slice(0, 0, 5), match, 1.0), c10::Error);
}

// ---------------------------------------------------------------------------
// HIB
// ---------------------------------------------------------------------------

// One side of a pair in plain doubles: C components of dimension D.
struct RefMixture {
  std::vector<std::vector<double>> mean, var;  // [C][D]
  std::vector<double> weights;                 // [C]
};

RefMixture MixtureOf(const EncoderOutput& out, int64_t item) {
  RefMixture m;
  if (out.kind == Kind::kGaussian) {
    m.mean = {Values(out.mean[item])};
    m.var = {Values(out.var[item])};
    m.weights = {1.0};
    return m;
  }
  const int64_t components = out.mean.size(1);
  for (int64_t c = 0; c < components; ++c) {
    m.mean.push_back(Values(out.mean[item][c]));
    m.var.push_back(Values(out.var[item][c]));
  }
  m.weights = Values(out.weights[item]);
  return m;
}

// Stratified samples and their weights (as losses.h describes them).
void RefSamples(const RefMixture& m, const std::vector<double>& noise, int64_t samples,
                std::vector<std::vector<double>>* z, std::vector<double>* w) {
  const size_t components = m.weights.size();
  const size_t dim = m.mean[0].size();
  const int64_t per = samples / static_cast<int64_t>(components);
  z->assign(samples, std::vector<double>(dim));
  w->assign(samples, 0);
  for (int64_t k = 0; k < samples; ++k) {
    const size_t c = static_cast<size_t>(k / per);
    for (size_t d = 0; d < dim; ++d) {
      (*z)[k][d] = m.mean[c][d] + std::sqrt(m.var[c][d]) * noise[k * dim + d];
    }
    (*w)[k] = m.weights[c] / per;
  }
}

double RefGaussianKl(const std::vector<double>& mean, const std::vector<double>& var) {
  double kl = 0;
  for (size_t d = 0; d < mean.size(); ++d) {
    kl += 0.5 * (var[d] + mean[d] * mean[d] - 1 - std::log(var[d]));
  }
  return kl;
}

double RefKl(const RefMixture& m, const std::vector<std::vector<double>>& z,
             const std::vector<double>& w, MogKl mode, bool is_gaussian) {
  if (is_gaussian) return RefGaussianKl(m.mean[0], m.var[0]);
  if (mode == MogKl::kComponentUpperBound) {
    double kl = 0;
    for (size_t c = 0; c < m.weights.size(); ++c)
      kl += m.weights[c] * RefGaussianKl(m.mean[c], m.var[c]);
    return kl;
  }
  double kl = 0;
  for (size_t k = 0; k < z.size(); ++k) {
    double q = 0, log_r = 0;
    for (size_t c = 0; c < m.weights.size(); ++c) {
      double log_density = 0;
      for (size_t d = 0; d < z[k].size(); ++d)
        log_density += LogNormal(z[k][d], m.mean[c][d], m.var[c][d]);
      q += m.weights[c] * std::exp(log_density);
    }
    for (size_t d = 0; d < z[k].size(); ++d) log_r += LogNormal(z[k][d], 0, 1);
    kl += w[k] * (std::log(q) - log_r);
  }
  return kl;
}

double ReferenceHib(const EncoderOutput& x1, const EncoderOutput& x2,
                    const std::vector<int64_t>& match, double a, double b,
                    const HibOptions& options, const torch::Tensor& noise1,
                    const torch::Tensor& noise2) {
  const int64_t batch = static_cast<int64_t>(match.size());
  const int64_t k = options.samples;
  double nll_total = 0, kl_total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    RefMixture m1 = MixtureOf(x1, i), m2 = MixtureOf(x2, i);
    std::vector<std::vector<double>> z1, z2;
    std::vector<double> w1, w2;
    RefSamples(m1, Values(noise1[i]), k, &z1, &w1);
    RefSamples(m2, Values(noise2[i]), k, &z2, &w2);
    double expected_nll = 0, p_match = 0;
    for (int64_t s = 0; s < k; ++s) {
      for (int64_t t = 0; t < k; ++t) {
        double sq = 0;
        for (size_t d = 0; d < z1[s].size(); ++d)
          sq += (z1[s][d] - z2[t][d]) * (z1[s][d] - z2[t][d]);
        const double p = Sigmoid(-a * std::sqrt(sq) + b);
        expected_nll += w1[s] * w2[t] * (match[i] ? -std::log(p) : -std::log(1 - p));
        p_match += w1[s] * w2[t] * p;
      }
    }
    nll_total += options.likelihood == HibLikelihood::kExpectedLogLikelihood
                     ? expected_nll
                     : (match[i] ? -std::log(p_match) : -std::log(1 - p_match));
    const bool gaussian = x1.kind == Kind::kGaussian;
    kl_total +=
        RefKl(m1, z1, w1, options.mog_kl, gaussian) + RefKl(m2, z2, w2, options.mog_kl, gaussian);
  }
  return nll_total / batch + options.beta * kl_total / batch;
}

EncoderOutput GaussianOutput(const torch::Tensor& mean, const torch::Tensor& var) {
  EncoderOutput out;
  out.kind = Kind::kGaussian;
  out.mean = mean;
  out.var = var;
  return out;
}

EncoderOutput MogOutput(const torch::Tensor& mean, const torch::Tensor& var,
                        const torch::Tensor& weights) {
  EncoderOutput out;
  out.kind = Kind::kMog;
  out.mean = mean;
  out.var = var;
  out.weights = weights;
  return out;
}

TEST(HibLossTest, GaussianMatchesReferenceForBothLikelihoods) {
  UseFewThreads();
  torch::manual_seed(2);
  const int64_t batch = 3, dim = 2, k = 4;
  torch::Tensor mean1 = torch::randn({batch, dim}, Double());
  torch::Tensor mean2 = torch::randn({batch, dim}, Double());
  torch::Tensor var1 = torch::rand({batch, dim}, Double()) + 0.2;
  torch::Tensor var2 = torch::rand({batch, dim}, Double()) + 0.2;
  torch::Tensor noise1 = torch::randn({batch, k, dim}, Double());
  torch::Tensor noise2 = torch::randn({batch, k, dim}, Double());
  torch::Tensor match = torch::tensor({1, 0, 1});
  HibOptions options;
  options.samples = k;
  options.beta = 0.1;  // large enough that a missing KL term fails the test
  for (auto likelihood :
       {HibLikelihood::kExpectedLogLikelihood, HibLikelihood::kLogMonteCarloProbability}) {
    options.likelihood = likelihood;
    LossOutput out = HibLoss(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2), match,
                             torch::tensor(1.7, Double()), torch::tensor(-0.3, Double()), options,
                             noise1, noise2);
    const double expected = ReferenceHib(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2),
                                         Labels(match), 1.7, -0.3, options, noise1, noise2);
    EXPECT_NEAR(out.loss.item<double>(), expected, 1e-10);
  }
  // The two estimators differ (Jensen): the test above would not notice a swap otherwise.
  options.likelihood = HibLikelihood::kExpectedLogLikelihood;
  const double a1 =
      HibLoss(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2), match,
              torch::tensor(1.7, Double()), torch::tensor(-0.3, Double()), options, noise1, noise2)
          .terms.at("nll");
  options.likelihood = HibLikelihood::kLogMonteCarloProbability;
  const double a2 =
      HibLoss(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2), match,
              torch::tensor(1.7, Double()), torch::tensor(-0.3, Double()), options, noise1, noise2)
          .terms.at("nll");
  EXPECT_GT(a1, a2);
}

TEST(HibLossTest, GaussianGradients) {
  UseFewThreads();
  torch::manual_seed(3);
  const int64_t batch = 2, dim = 2, k = 3;
  torch::Tensor noise1 = torch::randn({batch, k, dim}, Double());
  torch::Tensor noise2 = torch::randn({batch, k, dim}, Double());
  torch::Tensor match = torch::tensor({1, 0});
  HibOptions options;
  options.samples = k;
  options.beta = 0.1;
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return HibLoss(GaussianOutput(in[0], in[1]), GaussianOutput(in[2], in[3]), match, in[4],
                       in[5], options, noise1, noise2)
            .loss;
      },
      {torch::randn({batch, dim}, Double()), torch::rand({batch, dim}, Double()) + 0.3,
       torch::randn({batch, dim}, Double()), torch::rand({batch, dim}, Double()) + 0.3,
       torch::tensor(0.9, Double()), torch::tensor(0.2, Double())});
}

// PFE eq. 3 without its constant, over the same-label pairs, in plain doubles.
double ReferenceVarianceMls(const std::vector<double>& m1, const std::vector<double>& v1,
                            const std::vector<double>& m2, const std::vector<double>& v2,
                            const std::vector<int64_t>& match, int64_t dim) {
  double total = 0;
  int same = 0;
  for (size_t i = 0; i < match.size(); ++i) {
    if (!match[i]) continue;
    ++same;
    for (int64_t d = 0; d < dim; ++d) {
      const double diff = m1[i * dim + d] - m2[i * dim + d];
      const double v = v1[i * dim + d] + v2[i * dim + d];
      total += 0.5 * (diff * diff / v + std::log(v));
    }
  }
  return same ? total / same : 0.0;
}

TEST(HibLossTest, VarianceTermIsPfesMutualLikelihoodOnTheVariancesOnly) {
  UseFewThreads();
  torch::manual_seed(4);
  const int64_t batch = 4, dim = 3, k = 4;
  torch::Tensor mean1 = torch::randn({batch, dim}, Double());
  torch::Tensor mean2 = torch::randn({batch, dim}, Double());
  torch::Tensor var1 = torch::rand({batch, dim}, Double()) + 0.2;
  torch::Tensor var2 = torch::rand({batch, dim}, Double()) + 0.2;
  torch::Tensor match = torch::tensor({1, 0, 1, 0});
  const double expected = ReferenceVarianceMls(Values(mean1), Values(var1), Values(mean2),
                                               Values(var2), Labels(match), dim);
  EXPECT_NEAR(VarianceMlsLoss(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2), match)
                  .item<double>(),
              expected, 1e-12);

  // In HibLoss: the published loss plus variance_mls times the term.
  torch::Tensor noise1 = torch::randn({batch, k, dim}, Double());
  torch::Tensor noise2 = torch::randn({batch, k, dim}, Double());
  HibOptions options;
  options.samples = k;
  auto loss = [&](const HibOptions& o) {
    return HibLoss(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2), match,
                   torch::tensor(1.7, Double()), torch::tensor(-0.3, Double()), o, noise1, noise2);
  };
  const double published = loss(options).loss.item<double>();
  EXPECT_EQ(loss(options).terms.count("variance_mls"), 0u);
  options.variance_mls = 0.5;
  LossOutput with = loss(options);
  EXPECT_NEAR(with.loss.item<double>(), published + 0.5 * expected, 1e-10);
  EXPECT_NEAR(with.terms.at("variance_mls"), expected, 1e-10);

  // Only the variances get a gradient, and it matches finite differences.
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return VarianceMlsLoss(GaussianOutput(mean1, in[0]), GaussianOutput(mean2, in[1]), match);
      },
      {var1, var2});
  torch::Tensor m1 = mean1.clone().requires_grad_(true), v1 = var1.clone().requires_grad_(true);
  VarianceMlsLoss(GaussianOutput(m1, v1), GaussianOutput(mean2, var2), match).backward();
  EXPECT_FALSE(m1.grad().defined() && m1.grad().abs().sum().item<double>() != 0);
  EXPECT_GT(v1.grad().abs().sum().item<double>(), 0);

  // Its optimum is s1 + s2 = (mu1 - mu2)^2 per dimension: a displaced pair
  // asks for wide variances, a close one for narrow.
  torch::Tensor left = torch::tensor({{0.0, 0.0}}, Double());
  torch::Tensor right = torch::tensor({{2.0, 0.1}}, Double());
  torch::Tensor one = torch::tensor({1});
  // v = exp(u) = s1 + s2, shared half and half by the two sides.
  torch::Tensor u = torch::zeros({1, 2}, Double()).requires_grad_(true);
  torch::optim::Adam adam({u}, torch::optim::AdamOptions(0.05));
  for (int i = 0; i < 2000; ++i) {
    adam.zero_grad();
    VarianceMlsLoss(GaussianOutput(left, u.exp() / 2), GaussianOutput(right, u.exp() / 2), one)
        .backward();
    adam.step();
  }
  EXPECT_NEAR(u[0][0].exp().item<double>(), 4.0, 0.04);
  EXPECT_NEAR(u[0][1].exp().item<double>(), 0.01, 0.0001);

  // No same-label pair: zero. Mixtures are refused.
  EXPECT_EQ(VarianceMlsLoss(GaussianOutput(mean1, var1), GaussianOutput(mean2, var2),
                            torch::tensor({0, 0, 0, 0}))
                .item<double>(),
            0.0);
  EncoderOutput mog =
      MogOutput(mean1.unsqueeze(1), var1.unsqueeze(1), torch::ones({batch, 1}, Double()));
  EXPECT_THROW(VarianceMlsLoss(mog, mog, match), c10::Error);
}

TEST(HibLossTest, MixtureStratifiedSamplingAndKlMatchReference) {
  UseFewThreads();
  torch::manual_seed(4);
  const int64_t batch = 2, components = 2, dim = 2, k = 4;
  torch::Tensor mean1 = torch::randn({batch, components, dim}, Double());
  torch::Tensor mean2 = torch::randn({batch, components, dim}, Double());
  torch::Tensor var1 = torch::rand({batch, components, dim}, Double()) + 0.2;
  torch::Tensor var2 = torch::rand({batch, components, dim}, Double()) + 0.2;
  // Unequal weights: each component pair must count pi_c * pi'_c'.
  torch::Tensor weights1 = torch::tensor({{0.7, 0.3}, {0.5, 0.5}}, Double());
  torch::Tensor weights2 = torch::tensor({{0.2, 0.8}, {0.5, 0.5}}, Double());
  torch::Tensor noise1 = torch::randn({batch, k, dim}, Double());
  torch::Tensor noise2 = torch::randn({batch, k, dim}, Double());
  torch::Tensor match = torch::tensor({0, 1});
  HibOptions options;
  options.samples = k;
  options.beta = 0.05;
  for (auto mode : {MogKl::kMonteCarlo, MogKl::kComponentUpperBound}) {
    options.mog_kl = mode;
    EncoderOutput x1 = MogOutput(mean1, var1, weights1), x2 = MogOutput(mean2, var2, weights2);
    LossOutput out = HibLoss(x1, x2, match, torch::tensor(1.1, Double()),
                             torch::tensor(0.5, Double()), options, noise1, noise2);
    EXPECT_NEAR(out.loss.item<double>(),
                ReferenceHib(x1, x2, Labels(match), 1.1, 0.5, options, noise1, noise2), 1e-10)
        << "mode " << static_cast<int>(mode);
  }
  // The upper bound is an upper bound of the exact KL; its Monte Carlo
  // estimate with many samples must lie below it.
  EncoderOutput x1 = MogOutput(mean1, var1, weights1);
  EmbeddingSamples many = SampleEmbeddings(x1, 20000);
  torch::Tensor mc = KlToStandardNormal(x1, MogKl::kMonteCarlo, many);
  torch::Tensor bound = KlToStandardNormal(x1, MogKl::kComponentUpperBound, many);
  EXPECT_TRUE((mc < bound).all().item<bool>()) << mc << bound;

  // Stratification needs K to be a multiple of C.
  options.samples = 3;
  EXPECT_THROW(
      HibLoss(x1, x1, match, torch::tensor(1.0, Double()), torch::tensor(0.0, Double()), options),
      c10::Error);
}

TEST(HibLossTest, MixtureGradients) {
  UseFewThreads();
  torch::manual_seed(5);
  const int64_t batch = 2, components = 2, dim = 2, k = 2;
  torch::Tensor noise1 = torch::randn({batch, k, dim}, Double());
  torch::Tensor noise2 = torch::randn({batch, k, dim}, Double());
  torch::Tensor weights = torch::full({batch, components}, 0.5, Double());
  torch::Tensor match = torch::tensor({1, 0});
  HibOptions options;
  options.samples = k;
  options.beta = 0.1;
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return HibLoss(MogOutput(in[0], in[1], weights), MogOutput(in[2], in[3], weights), match,
                       in[4], in[5], options, noise1, noise2)
            .loss;
      },
      {torch::randn({batch, components, dim}, Double()),
       torch::rand({batch, components, dim}, Double()) + 0.3,
       torch::randn({batch, components, dim}, Double()),
       torch::rand({batch, components, dim}, Double()) + 0.3, torch::tensor(0.9, Double()),
       torch::tensor(0.2, Double())});
}

// ---------------------------------------------------------------------------
// SPE and prototypical networks
// ---------------------------------------------------------------------------

struct RefPrototypes {
  std::vector<int64_t> labels;
  std::vector<std::vector<double>> rho, w;
};

RefPrototypes ReferencePrototypes(const torch::Tensor& mean, const torch::Tensor& var,
                                  const torch::Tensor& labels, double sigma_eps2) {
  std::vector<int64_t> lab = Labels(labels);
  std::map<int64_t, std::vector<int64_t>> members;
  for (size_t i = 0; i < lab.size(); ++i) members[lab[i]].push_back(static_cast<int64_t>(i));
  const int64_t dim = mean.size(1);
  std::vector<double> mu = Values(mean), s2 = Values(var);
  RefPrototypes p;
  for (const auto& [label, items] : members) {
    std::vector<double> rho(dim), w(dim);
    for (int64_t d = 0; d < dim; ++d) {
      double precision = 0, weighted = 0;
      for (int64_t i : items) {
        const double v = s2[i * dim + d] + sigma_eps2;
        precision += 1 / v;
        weighted += mu[i * dim + d] / v;
      }
      rho[d] = weighted / precision;
      w[d] = 1 / precision + sigma_eps2;
    }
    p.labels.push_back(label);
    p.rho.push_back(rho);
    p.w.push_back(w);
  }
  return p;
}

double ReferenceSpe(const RefPrototypes& p, const torch::Tensor& query_mean,
                    const torch::Tensor& query_var, const torch::Tensor& query_labels,
                    const torch::Tensor& noise, SpeSampler sampler) {
  const int64_t queries = query_mean.size(0), dim = query_mean.size(1), samples = noise.size(1);
  std::vector<double> mu = Values(query_mean), s2 = Values(query_var), eps = Values(noise);
  std::vector<int64_t> lab = Labels(query_labels);
  const size_t classes = p.labels.size();
  double total = 0;
  for (int64_t q = 0; q < queries; ++q) {
    size_t t = 0;
    while (p.labels[t] != lab[q]) ++t;
    double estimate = 0;
    for (int64_t s = 0; s < samples; ++s) {
      std::vector<double> z(dim);
      for (int64_t d = 0; d < dim; ++d) {
        const double m = mu[q * dim + d], v = s2[q * dim + d];
        const double e = eps[(q * samples + s) * dim + d];
        if (sampler == SpeSampler::kIntersection) {
          const double r = p.rho[t][d], w = p.w[t][d];
          z[d] = (w * m + v * r) / (v + w) + std::sqrt(v * w / (v + w)) * e;
        } else {
          z[d] = m + std::sqrt(v) * e;
        }
      }
      std::vector<double> density(classes);
      double sum = 0;
      for (size_t y = 0; y < classes; ++y) {
        double log_density = 0;
        for (int64_t d = 0; d < dim; ++d) log_density += LogNormal(z[d], p.rho[y][d], p.w[y][d]);
        density[y] = std::exp(log_density);
        sum += density[y];
      }
      estimate += sampler == SpeSampler::kIntersection ? 1 / sum : density[t] / sum;
    }
    estimate /= samples;
    if (sampler == SpeSampler::kIntersection) {
      double log_evidence = 0;
      for (int64_t d = 0; d < dim; ++d) {
        log_evidence += LogNormal(mu[q * dim + d], p.rho[t][d], s2[q * dim + d] + p.w[t][d]);
      }
      estimate *= std::exp(log_evidence);
    }
    total += -std::log(estimate);
  }
  return total / queries;
}

struct Episode {
  torch::Tensor support_mean, support_var, support_labels;
  torch::Tensor query_mean, query_var, query_labels;
};

Episode MakeEpisode() {
  Episode e;
  e.support_mean = torch::randn({5, 2}, Double());
  e.support_var = torch::rand({5, 2}, Double()) + 0.1;
  e.support_labels = torch::tensor({7, 3, 9, 3, 7});
  e.query_mean = torch::randn({3, 2}, Double());
  e.query_var = torch::rand({3, 2}, Double()) + 0.1;
  e.query_labels = torch::tensor({7, 3, 9});
  return e;
}

TEST(SpeLossTest, PrototypesMatchReference) {
  torch::manual_seed(6);
  Episode e = MakeEpisode();
  SpePrototypes p = ComputeSpePrototypes(e.support_mean, e.support_var, e.support_labels,
                                         torch::tensor(0.5, Double()));
  RefPrototypes r = ReferencePrototypes(e.support_mean, e.support_var, e.support_labels, 0.5);
  ASSERT_EQ(Labels(p.labels), r.labels);
  for (size_t y = 0; y < r.labels.size(); ++y) {
    for (int d = 0; d < 2; ++d) {
      EXPECT_NEAR(p.rho[y][d].item<double>(), r.rho[y][d], 1e-12);
      EXPECT_NEAR(p.w[y][d].item<double>(), r.w[y][d], 1e-12);
    }
  }
}

TEST(SpeLossTest, BothSamplersMatchReference) {
  UseFewThreads();
  torch::manual_seed(7);
  Episode e = MakeEpisode();
  torch::Tensor noise = torch::randn({3, 2, 2}, Double());
  RefPrototypes r = ReferencePrototypes(e.support_mean, e.support_var, e.support_labels, 0.5);
  for (auto sampler : {SpeSampler::kIntersection, SpeSampler::kNaive}) {
    SpeOptions options;
    options.sampler = sampler;
    options.samples = 2;
    LossOutput out =
        SpeLoss(e.support_mean, e.support_var, e.support_labels, e.query_mean, e.query_var,
                e.query_labels, torch::tensor(0.5, Double()), options, noise);
    EXPECT_NEAR(out.loss.item<double>(),
                ReferenceSpe(r, e.query_mean, e.query_var, e.query_labels, noise, sampler), 1e-10)
        << "sampler " << static_cast<int>(sampler);
  }
}

TEST(SpeLossTest, IntersectionAndNaiveSamplersEstimateTheSamePosterior) {
  UseFewThreads();
  torch::manual_seed(8);
  Episode e = MakeEpisode();
  e.query_var = e.query_var + 0.5;  // wide queries: the two samplers really differ per sample
  SpeOptions options;
  options.samples = 40000;
  options.sampler = SpeSampler::kIntersection;
  const double intersection =
      SpeLoss(e.support_mean, e.support_var, e.support_labels, e.query_mean, e.query_var,
              e.query_labels, torch::tensor(0.5, Double()), options)
          .loss.item<double>();
  options.sampler = SpeSampler::kNaive;
  const double naive = SpeLoss(e.support_mean, e.support_var, e.support_labels, e.query_mean,
                               e.query_var, e.query_labels, torch::tensor(0.5, Double()), options)
                           .loss.item<double>();
  EXPECT_NEAR(intersection, naive, 0.01);
}

TEST(SpeLossTest, Gradients) {
  UseFewThreads();
  torch::manual_seed(9);
  Episode e = MakeEpisode();
  torch::Tensor noise = torch::randn({3, 1, 2}, Double());
  for (auto sampler : {SpeSampler::kIntersection, SpeSampler::kNaive}) {
    SpeOptions options;
    options.sampler = sampler;
    ExpectGradientsMatchFiniteDifferences(
        [&](const std::vector<torch::Tensor>& in) {
          return SpeLoss(in[0], in[1], e.support_labels, in[2], in[3], e.query_labels, in[4],
                         options, noise)
              .loss;
        },
        {e.support_mean, e.support_var, e.query_mean, e.query_var, torch::tensor(0.7, Double())});
  }
}

TEST(SpeLossTest, UnknownQueryLabelIsRejected) {
  Episode e = MakeEpisode();
  e.query_labels = torch::tensor({7, 3, 4});
  EXPECT_THROW(SpeLoss(e.support_mean, e.support_var, e.support_labels, e.query_mean, e.query_var,
                       e.query_labels, torch::tensor(0.5, Double()), SpeOptions{}),
               c10::Error);
}

double ReferenceProtoNet(const torch::Tensor& support, const torch::Tensor& support_labels,
                         const torch::Tensor& query, const torch::Tensor& query_labels) {
  const int64_t dim = support.size(1);
  std::vector<double> s = Values(support), q = Values(query);
  std::vector<int64_t> sl = Labels(support_labels), ql = Labels(query_labels);
  std::map<int64_t, std::vector<double>> sums;
  std::map<int64_t, int> counts;
  for (size_t i = 0; i < sl.size(); ++i) {
    auto& sum = sums[sl[i]];
    sum.resize(dim, 0.0);
    for (int64_t d = 0; d < dim; ++d) sum[d] += s[i * dim + d];
    ++counts[sl[i]];
  }
  double total = 0;
  for (size_t j = 0; j < ql.size(); ++j) {
    double norm = 0, target = 0;
    for (const auto& [label, sum] : sums) {
      double sq = 0;
      for (int64_t d = 0; d < dim; ++d) {
        const double diff = q[j * dim + d] - sum[d] / counts[label];
        sq += diff * diff;
      }
      norm += std::exp(-sq);
      if (label == ql[j]) target = -sq;
    }
    total += -(target - std::log(norm));
  }
  return total / static_cast<double>(ql.size());
}

TEST(ProtoNetLossTest, MatchesReferenceAndGradients) {
  UseFewThreads();
  torch::manual_seed(10);
  Episode e = MakeEpisode();
  LossOutput out = ProtoNetLoss(e.support_mean, e.support_labels, e.query_mean, e.query_labels);
  EXPECT_NEAR(out.loss.item<double>(),
              ReferenceProtoNet(e.support_mean, e.support_labels, e.query_mean, e.query_labels),
              1e-10);
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return ProtoNetLoss(in[0], e.support_labels, in[1], e.query_labels).loss;
      },
      {e.support_mean, e.query_mean});
}

// ---------------------------------------------------------------------------
// DIMCO
// ---------------------------------------------------------------------------

double RefEntropy(const std::vector<double>& p) {
  double h = 0;
  for (double v : p) h -= v * std::log(v);
  return h;
}

double ReferenceDimco(const torch::Tensor& log_probs, const torch::Tensor& labels,
                      const std::vector<std::pair<int, int>>& pairs, double lambda) {
  const int64_t batch = log_probs.size(0), dims = log_probs.size(1), k = log_probs.size(2);
  std::vector<double> lp = Values(log_probs);
  auto prob = [&](int64_t n, int64_t i, int64_t j) { return std::exp(lp[(n * dims + i) * k + j]); };
  std::vector<int64_t> lab = Labels(labels);
  auto mean_dist = [&](int64_t i, const std::vector<int64_t>& items) {
    std::vector<double> p(k, 0.0);
    for (int64_t n : items)
      for (int64_t j = 0; j < k; ++j) p[j] += prob(n, i, j) / items.size();
    return p;
  };
  std::vector<int64_t> all(batch);
  for (int64_t n = 0; n < batch; ++n) all[n] = n;
  double h = 0;
  for (int64_t i = 0; i < dims; ++i) h += RefEntropy(mean_dist(i, all));
  std::map<int64_t, std::vector<int64_t>> classes;
  for (int64_t n = 0; n < batch; ++n) classes[lab[n]].push_back(n);
  double h_given_y = 0;
  for (const auto& [label, items] : classes) {
    double hy = 0;
    for (int64_t i = 0; i < dims; ++i) hy += RefEntropy(mean_dist(i, items));
    h_given_y += static_cast<double>(items.size()) / batch * hy;
  }
  double ind = 0;
  for (auto [i1, i2] : pairs) {
    std::vector<double> p1 = mean_dist(i1, all), p2 = mean_dist(i2, all);
    for (int64_t a = 0; a < k; ++a) {
      for (int64_t b = 0; b < k; ++b) {
        double joint = 0;
        for (int64_t n = 0; n < batch; ++n) joint += prob(n, i1, a) * prob(n, i2, b) / batch;
        const double product = p1[a] * p2[b];
        ind += product * std::log(product / joint);
      }
    }
  }
  ind /= pairs.size();
  return -h + h_given_y + lambda * ind;
}

TEST(DimcoLossTest, MatchesReferenceAndGradients) {
  UseFewThreads();
  torch::manual_seed(11);
  torch::Tensor logits = torch::randn({6, 3, 4}, Double());
  torch::Tensor labels = torch::tensor({5, 5, 1, 1, 1, 8});
  torch::Tensor pairs = torch::tensor({{0, 1}, {2, 0}}, torch::kLong);
  DimcoOptions options;
  options.lambda = 1.0;
  LossOutput out = DimcoLoss(torch::log_softmax(logits, -1), labels, options, pairs);
  EXPECT_NEAR(out.loss.item<double>(),
              ReferenceDimco(torch::log_softmax(logits, -1), labels, {{0, 1}, {2, 0}}, 1.0), 1e-10);
  EXPECT_NEAR(out.terms.at("mutual_information"),
              out.terms.at("h_codes") - out.terms.at("h_codes_given_y"), 1e-12);
  EXPECT_GT(out.terms.at("independence"), 0.0);  // KL of a random batch is positive
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return DimcoLoss(torch::log_softmax(in[0], -1), labels, options, pairs).loss;
      },
      {logits});
}

TEST(DimcoLossTest, PerfectCodesReachTheMutualInformationBound) {
  // Two classes, one-hot-ish codes that are constant within a class and
  // differ between classes in both dimensions: I = H(Y) = log 2 per dimension.
  torch::Tensor logits = torch::full({4, 2, 2}, -40.0, Double());
  for (int n = 0; n < 4; ++n) {
    const int symbol = n < 2 ? 0 : 1;
    logits[n][0][symbol] = 40.0;
    logits[n][1][1 - symbol] = 40.0;
  }
  LossOutput out = DimcoLoss(torch::log_softmax(logits, -1), torch::tensor({0, 0, 1, 1}),
                             DimcoOptions{}, torch::zeros({0, 2}, torch::kLong));
  EXPECT_NEAR(out.terms.at("mutual_information"), 2 * std::log(2.0), 1e-9);
  EXPECT_NEAR(out.loss.item<double>(), -2 * std::log(2.0), 1e-9);
}

TEST(DimcoLossTest, RandomPairsAreDistinctDimensions) {
  torch::manual_seed(12);
  torch::Tensor log_probs = torch::log_softmax(torch::randn({8, 2, 3}, Double()), -1);
  DimcoOptions options;
  options.independence_pairs = 50;
  // With d = 2 every random pair is (0, 1) or (1, 0), both with the same KL
  // value up to orientation; compare with the explicit pairs.
  LossOutput random = DimcoLoss(log_probs, torch::tensor({0, 0, 1, 1, 2, 2, 3, 3}), options);
  LossOutput fixed = DimcoLoss(log_probs, torch::tensor({0, 0, 1, 1, 2, 2, 3, 3}), options,
                               torch::tensor({{0, 1}}, torch::kLong));
  EXPECT_NEAR(random.terms.at("independence"), fixed.terms.at("independence"), 1e-12);
}

// ---------------------------------------------------------------------------
// F-statistic
// ---------------------------------------------------------------------------

// I_x(1/2, n) for integer n, independent of the continued fraction.
double HalfIncompleteBeta(double x, int n) {
  double term = 1.0, sum = 0.0;
  for (int j = 0; j < n; ++j) {
    sum += term;
    term *= (0.5 + j) / (j + 1) * (1.0 - x);
  }
  return std::sqrt(x) * sum;
}

double ReferenceFStatistic(const torch::Tensor& z, const torch::Tensor& labels, int top) {
  const int64_t dims = z.size(1);
  std::vector<double> v = Values(z);
  std::vector<int64_t> lab = Labels(labels);
  std::map<int64_t, std::vector<int64_t>> classes;
  for (size_t n = 0; n < lab.size(); ++n) classes[lab[n]].push_back(static_cast<int64_t>(n));
  std::vector<std::vector<int64_t>> members;
  for (const auto& [label, items] : classes) members.push_back(items);
  auto class_mean = [&](const std::vector<int64_t>& items, int64_t d) {
    double m = 0;
    for (int64_t n : items) m += v[n * dims + d];
    return m / items.size();
  };
  double loss = 0;
  for (size_t a = 0; a < members.size(); ++a) {
    for (size_t b = a + 1; b < members.size(); ++b) {
      const int na = static_cast<int>(members[a].size()), nb = static_cast<int>(members[b].size());
      const int df = na + nb - 2;
      if (df < 1) continue;
      EXPECT_EQ(df % 2, 0) << "the reference needs integer b = df / 2";
      std::vector<double> phi(dims);
      for (int64_t d = 0; d < dims; ++d) {
        const double ma = class_mean(members[a], d), mb = class_mean(members[b], d);
        const double m = (ma + mb) / 2;
        const double between = na * (ma - m) * (ma - m) + nb * (mb - m) * (mb - m);
        double within = 0;
        for (int64_t n : members[a]) within += (v[n * dims + d] - ma) * (v[n * dims + d] - ma);
        for (int64_t n : members[b]) within += (v[n * dims + d] - mb) * (v[n * dims + d] - mb);
        phi[d] = HalfIncompleteBeta(between / (between + within), df / 2);
      }
      std::sort(phi.rbegin(), phi.rend());
      for (int t = 0; t < top; ++t) loss -= std::log(phi[t]);
    }
  }
  return loss;
}

TEST(FStatisticLossTest, MatchesReferenceAndGradients) {
  UseFewThreads();
  torch::manual_seed(13);
  // Class sizes 3, 3, 1: pair degrees of freedom 4, 2, 2 (integer b for the reference).
  torch::Tensor z = torch::randn({7, 4}, Double());
  torch::Tensor labels = torch::tensor({4, 2, 4, 2, 4, 2, 6});
  FStatisticOptions options;
  options.top_dims = 2;
  LossOutput out = FStatisticLoss(z, labels, options);
  EXPECT_EQ(out.terms.at("pairs"), 3.0);
  EXPECT_NEAR(out.loss.item<double>(), ReferenceFStatistic(z, labels, 2), 1e-9);
  ExpectGradientsMatchFiniteDifferences(
      [&](const std::vector<torch::Tensor>& in) {
        return FStatisticLoss(in[0], labels, options).loss;
      },
      {z}, 1e-5);
}

TEST(FStatisticLossTest, SeparatedClassesHaveSmallLossAndSingletonPairsAreSkipped) {
  torch::Tensor z = torch::tensor({{0.0, 0.1}, {0.1, -0.1}, {5.0, 0.0}, {5.1, 0.1}}, Double());
  FStatisticOptions options;
  options.top_dims = 1;
  LossOutput separated = FStatisticLoss(z, torch::tensor({0, 0, 1, 1}), options);
  LossOutput mixed = FStatisticLoss(z, torch::tensor({0, 1, 0, 1}), options);
  EXPECT_LT(separated.loss.item<double>(), mixed.loss.item<double>());
  // Three singletons: no pair has a degree of freedom.
  LossOutput none = FStatisticLoss(z.slice(0, 0, 3), torch::tensor({0, 1, 2}), options);
  EXPECT_EQ(none.terms.at("pairs"), 0.0);
  EXPECT_EQ(none.loss.item<double>(), 0.0);
}

// A dimension that is constant over the batch (0 / 0 in the F ratio) gave NaN
// in float32, where the old 1e-300 guard is 0, and top-d picked the NaN.
TEST(FStatisticLossTest, ConstantDimensionIsNeverPickedInFloat32) {
  torch::manual_seed(5);
  torch::Tensor z64 = torch::randn({8, 3}, Double());
  z64.index_put_({torch::indexing::Slice(), 1}, 0.25);  // dimension 1 constant
  torch::Tensor labels = torch::tensor({0, 0, 0, 0, 1, 1, 1, 1});
  FStatisticOptions options;
  options.top_dims = 2;
  torch::Tensor z32 = z64.to(torch::kFloat).requires_grad_(true);
  LossOutput f32 = FStatisticLoss(z32, labels, options);
  LossOutput f64 = FStatisticLoss(z64, labels, options);
  ASSERT_TRUE(std::isfinite(f32.loss.item<double>()));
  EXPECT_NEAR(f32.loss.item<double>(), f64.loss.item<double>(),
              1e-3 * std::fabs(f64.loss.item<double>()));
  f32.loss.backward();
  EXPECT_TRUE(torch::isfinite(z32.grad()).all().item<bool>());
  // top_dims = 2 of 3 dimensions: the constant one is the one left out, so the
  // loss equals that of the two varying dimensions alone.
  torch::Tensor varying = torch::cat({z64.slice(1, 0, 1), z64.slice(1, 2, 3)}, 1);
  EXPECT_NEAR(f64.loss.item<double>(), FStatisticLoss(varying, labels, options).loss.item<double>(),
              1e-9);
}

// Ordinary input: float32 and float64 agree.
TEST(FStatisticLossTest, Float32AgreesWithFloat64) {
  torch::manual_seed(6);
  torch::Tensor z64 = torch::randn({12, 5}, Double());
  torch::Tensor labels = torch::tensor({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  FStatisticOptions options;
  options.top_dims = 3;
  const double l64 = FStatisticLoss(z64, labels, options).loss.item<double>();
  const double l32 = FStatisticLoss(z64.to(torch::kFloat), labels, options).loss.item<double>();
  EXPECT_NEAR(l32, l64, 1e-4 * std::fabs(l64));
}

}  // namespace
}  // namespace hedgedb::encoders
