// Every exact scorer against a direct reference on small random inputs, the
// Monte Carlo estimate against independent brute force, eta, and validation.
#include "query/scorer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "query/kernels.h"
#include "query/scalar_reference.h"
#include "tests/query/test_rows.h"

namespace hedgedb {
namespace query {
namespace {

using testing_rows::Iota;
using testing_rows::RandomRow;
using testing_rows::RandomRows;

RowShape Shape(Kind kind, int dim, int components = 1, int code_k = 0) {
  RowShape shape;
  shape.kind = kind;
  shape.dim = dim;
  shape.components = components;
  shape.code_k = code_k;
  return shape;
}

ScoreParams Params(ScoreType score, int samples = 8, uint64_t seed = 0, float a = 1.0f,
                   float b = 0.0f) {
  ScoreParams params;
  params.score = score;
  params.samples = samples;
  params.seed = seed;
  params.match_a = a;
  params.match_b = b;
  return params;
}

double Sigmoid(double t) { return 1.0 / (1.0 + std::exp(-t)); }

// A mixture row viewed component by component (gaussian: one component).
struct Mixture {
  std::vector<double> weight;
  std::vector<std::vector<double>> mean, var;
};

Mixture View(const RowShape& shape, const float* row) {
  Mixture m;
  const int dim = shape.dim;
  if (shape.kind == Kind::kGaussian) {
    m.weight = {1.0};
    m.mean = {std::vector<double>(row, row + dim)};
    m.var = {std::vector<double>(row + dim, row + 2 * dim)};
    return m;
  }
  const int c_count = shape.components;
  for (int c = 0; c < c_count; ++c) {
    m.weight.push_back(row[c]);
    const float* mean = row + c_count + c * dim;
    const float* var = row + c_count + c_count * dim + c * dim;
    m.mean.emplace_back(mean, mean + dim);
    m.var.emplace_back(var, var + dim);
  }
  return m;
}

// Moments by the law of total variance, written out per component.
void Moments(const Mixture& m, std::vector<double>* mean, std::vector<double>* var) {
  const size_t dim = m.mean[0].size();
  mean->assign(dim, 0.0);
  var->assign(dim, 0.0);
  for (size_t c = 0; c < m.weight.size(); ++c) {
    for (size_t d = 0; d < dim; ++d) (*mean)[d] += m.weight[c] * m.mean[c][d];
  }
  for (size_t c = 0; c < m.weight.size(); ++c) {
    for (size_t d = 0; d < dim; ++d) {
      const double second = m.var[c][d] + m.mean[c][d] * m.mean[c][d];
      (*var)[d] += m.weight[c] * second;
    }
  }
  for (size_t d = 0; d < dim; ++d) (*var)[d] -= (*mean)[d] * (*mean)[d];
}

std::vector<float> ScoreAll(const RowShape& shape, const ScoreParams& params,
                            const std::vector<float>& query, const std::vector<float>& items,
                            size_t n) {
  std::unique_ptr<PreparedQuery> prepared;
  const Status s = PrepareQuery(shape, params, query.data(), &prepared);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  const std::vector<int64_t> rows = Iota(n);
  std::vector<float> out(n);
  prepared->ScoreRows(items.data(), shape.item_row_size() * sizeof(float), rows.data(), n,
                      out.data());
  return out;
}

// ---------------------------------------------------------------------------
// Shapes, resolution, validation.

TEST(RowShapeTest, Sizes) {
  EXPECT_EQ(Shape(Kind::kPoint, 5).item_row_size(), 5u);
  EXPECT_EQ(Shape(Kind::kGaussian, 5).item_row_size(), 10u);
  EXPECT_EQ(Shape(Kind::kMog, 5, 3).item_row_size(), 33u);
  EXPECT_EQ(Shape(Kind::kMog, 5, 3).query_row_size(), 33u);
  EXPECT_EQ(Shape(Kind::kCodes, 32, 1, 16).item_row_size(), 32u);
  EXPECT_EQ(Shape(Kind::kCodes, 32, 1, 16).query_row_size(), 512u);
}

TEST(ResolveScoreTest, Defaults) {
  EXPECT_EQ(ResolveScore(Kind::kPoint, ScoreType::kDefault), ScoreType::kMatch);
  EXPECT_EQ(ResolveScore(Kind::kPoint, ScoreType::kMc), ScoreType::kMatch);
  EXPECT_EQ(ResolveScore(Kind::kPoint, ScoreType::kL2), ScoreType::kL2);
  EXPECT_EQ(ResolveScore(Kind::kGaussian, ScoreType::kDefault), ScoreType::kMc);
  EXPECT_EQ(ResolveScore(Kind::kMog, ScoreType::kDefault), ScoreType::kMc);
  EXPECT_EQ(ResolveScore(Kind::kMog, ScoreType::kMls), ScoreType::kMls);
  EXPECT_EQ(ResolveScore(Kind::kCodes, ScoreType::kDefault), ScoreType::kLogprob);
}

TEST(ValidateScoreParamsTest, ScoresPerKind) {
  const std::vector<ScoreType> all = {ScoreType::kDefault, ScoreType::kMc, ScoreType::kCsd,
                                      ScoreType::kMls,     ScoreType::kL2, ScoreType::kMatch,
                                      ScoreType::kLogprob};
  auto allowed = [](Kind kind, ScoreType score) {
    switch (kind) {
      case Kind::kPoint:
        return score == ScoreType::kDefault || score == ScoreType::kMc || score == ScoreType::kL2 ||
               score == ScoreType::kMatch;
      case Kind::kGaussian:
      case Kind::kMog:
        return score != ScoreType::kLogprob;
      case Kind::kCodes:
        return score == ScoreType::kDefault || score == ScoreType::kLogprob;
    }
    return false;
  };
  for (Kind kind : {Kind::kPoint, Kind::kGaussian, Kind::kMog, Kind::kCodes}) {
    const RowShape shape = Shape(kind, 4, 2, 16);
    for (ScoreType score : all) {
      const Status s = ValidateScoreParams(shape, Params(score));
      EXPECT_EQ(s.ok(), allowed(kind, score)) << KindName(kind) << " " << ScoreName(score);
      if (!s.ok()) {
        EXPECT_TRUE(s.IsInvalidArgument());
        EXPECT_EQ(s.message(), std::string("score '") + ScoreName(score) + "' does not apply to " +
                                   KindName(kind) + " collections");
      }
    }
  }
  EXPECT_EQ(ValidateScoreParams(Shape(Kind::kGaussian, 4), Params(ScoreType::kLogprob)).message(),
            "score 'logprob' does not apply to gaussian collections");
}

TEST(ValidateScoreParamsTest, SamplesAndMatchParameters) {
  const RowShape gaussian = Shape(Kind::kGaussian, 4);
  EXPECT_TRUE(ValidateScoreParams(gaussian, Params(ScoreType::kMc, 1)).ok());
  EXPECT_TRUE(ValidateScoreParams(gaussian, Params(ScoreType::kMc, 0)).IsInvalidArgument());
  EXPECT_TRUE(ValidateScoreParams(gaussian, Params(ScoreType::kMc, -3)).IsInvalidArgument());
  EXPECT_TRUE(
      ValidateScoreParams(gaussian, Params(ScoreType::kMc, kMaxSamples + 1)).IsInvalidArgument());
  const RowShape mog = Shape(Kind::kMog, 4, 3);
  EXPECT_TRUE(ValidateScoreParams(mog, Params(ScoreType::kMc, 9)).ok());
  const Status not_multiple = ValidateScoreParams(mog, Params(ScoreType::kMc, 8));
  EXPECT_TRUE(not_multiple.IsInvalidArgument());
  EXPECT_NE(not_multiple.message().find("multiple"), std::string::npos) << not_multiple.message();
  EXPECT_TRUE(
      ValidateScoreParams(gaussian, Params(ScoreType::kMc, 8, 0, 0.0f)).IsInvalidArgument());
  EXPECT_TRUE(
      ValidateScoreParams(gaussian, Params(ScoreType::kMc, 8, 0, -1.0f)).IsInvalidArgument());
  EXPECT_TRUE(ValidateScoreParams(gaussian, Params(ScoreType::kMc, 8, 0, NAN)).IsInvalidArgument());
  EXPECT_TRUE(ValidateScoreParams(Shape(Kind::kPoint, 4), Params(ScoreType::kMatch, 8, 0, 0.0f))
                  .IsInvalidArgument());
}

TEST(ValidateScoreParamsTest, Shapes) {
  EXPECT_TRUE(
      ValidateScoreParams(Shape(Kind::kGaussian, 0), Params(ScoreType::kMc)).IsInvalidArgument());
  EXPECT_TRUE(
      ValidateScoreParams(Shape(Kind::kMog, 4, 0), Params(ScoreType::kMc)).IsInvalidArgument());
  EXPECT_TRUE(ValidateScoreParams(Shape(Kind::kCodes, 4, 1, 1), Params(ScoreType::kLogprob))
                  .IsInvalidArgument());
  EXPECT_TRUE(ValidateScoreParams(Shape(Kind::kCodes, 4, 1, 257), Params(ScoreType::kLogprob))
                  .IsInvalidArgument());
  EXPECT_TRUE(
      ValidateScoreParams(Shape(Kind::kCodes, 4, 1, 256), Params(ScoreType::kLogprob)).ok());
}

// Query rows are checked by the collection (tests/engine/db_test.cc,
// BadQueryRowsAreRejectedWhereverTheyCome); PrepareQuery checks the params.
TEST(PrepareQueryTest, RejectsAScoreOfAnotherKind) {
  std::unique_ptr<PreparedQuery> prepared;
  const RowShape gaussian = Shape(Kind::kGaussian, 2);
  const float good[4] = {0, 0, 1, 1};
  EXPECT_TRUE(PrepareQuery(gaussian, Params(ScoreType::kMc), good, &prepared).ok());
  EXPECT_TRUE(
      PrepareQuery(gaussian, Params(ScoreType::kLogprob), good, &prepared).IsInvalidArgument());
}

// ---------------------------------------------------------------------------
// Closed forms.

class ClosedFormTest : public ::testing::TestWithParam<Kind> {};

TEST_P(ClosedFormTest, MatchesDirectFormulas) {
  const Kind kind = GetParam();
  const RowShape shape = Shape(kind, 7, 3);
  const float a = 1.3f, b = 0.4f;
  std::mt19937_64 rng(21);
  const size_t n = 25;
  const std::vector<float> items = RandomRows(shape, n, 0, &rng);
  const std::vector<float> query = RandomRow(shape, &rng);
  const size_t stride = shape.item_row_size();
  const double log_two_pi = std::log(2.0 * M_PI);

  for (ScoreType score : {ScoreType::kL2, ScoreType::kMatch, ScoreType::kCsd, ScoreType::kMls}) {
    if (kind == Kind::kPoint && (score == ScoreType::kCsd || score == ScoreType::kMls)) continue;
    const std::vector<float> got = ScoreAll(shape, Params(score, 9, 0, a, b), query, items, n);
    ASSERT_EQ(got.size(), n);
    for (size_t r = 0; r < n; ++r) {
      const float* item = items.data() + r * stride;
      double expected = 0;
      if (kind == Kind::kPoint) {
        double sq = 0;
        for (int d = 0; d < shape.dim; ++d) sq += std::pow(double(query[d]) - item[d], 2);
        expected = score == ScoreType::kL2 ? -std::sqrt(sq) : Sigmoid(-a * std::sqrt(sq) + b);
      } else {
        const Mixture q = View(shape, query.data()), x = View(shape, item);
        std::vector<double> qm, qv, xm, xv;
        Moments(q, &qm, &qv);
        Moments(x, &xm, &xv);
        if (score == ScoreType::kCsd) {
          // E||z1 - z2||^2 summed over component pairs, not via moments.
          double e = 0;
          for (size_t c = 0; c < q.weight.size(); ++c) {
            for (size_t c2 = 0; c2 < x.weight.size(); ++c2) {
              double pair = 0;
              for (int d = 0; d < shape.dim; ++d) {
                pair += std::pow(q.mean[c][d] - x.mean[c2][d], 2) + q.var[c][d] + x.var[c2][d];
              }
              e += q.weight[c] * x.weight[c2] * pair;
            }
          }
          expected = -e;
        } else if (score == ScoreType::kMls) {
          double s = 0;
          for (int d = 0; d < shape.dim; ++d) {
            const double v = qv[d] + xv[d];
            s += std::pow(qm[d] - xm[d], 2) / v + std::log(v);
          }
          expected = -0.5 * s - 0.5 * shape.dim * log_two_pi;
        } else {
          double sq = 0;
          for (int d = 0; d < shape.dim; ++d) sq += std::pow(qm[d] - xm[d], 2);
          expected = score == ScoreType::kL2 ? -std::sqrt(sq) : Sigmoid(-a * std::sqrt(sq) + b);
        }
      }
      EXPECT_NEAR(got[r], expected, 1e-5 * (1 + std::fabs(expected)))
          << KindName(kind) << " " << ScoreName(score) << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, ClosedFormTest,
                         ::testing::Values(Kind::kPoint, Kind::kGaussian, Kind::kMog),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(KindName(info.param));
                         });

TEST(PointScoreTest, McIsMatch) {
  const RowShape shape = Shape(Kind::kPoint, 6);
  std::mt19937_64 rng(4);
  const std::vector<float> items = RandomRows(shape, 9, 0, &rng);
  const std::vector<float> query = RandomRow(shape, &rng);
  EXPECT_EQ(ScoreAll(shape, Params(ScoreType::kMc, 8, 0, 2.0f, 1.0f), query, items, 9),
            ScoreAll(shape, Params(ScoreType::kMatch, 8, 0, 2.0f, 1.0f), query, items, 9));
}

// ---------------------------------------------------------------------------
// Monte Carlo match probability.

// Direct HIB eq. 5 in double: every component pair (c, c') with weight
// pi_c pi'_c' times the mean over its (K/C)^2 sample pairs.
double DirectMc(const RowShape& shape, const ScoreParams& p, const float* query, const float* item,
                uint64_t query_stream = kQuerySampleStream,
                uint64_t item_stream = kItemSampleStream) {
  const int dim = shape.dim, k = p.samples;
  const std::vector<float> eq = GenerateNormalBank(p.seed, query_stream, size_t(k) * dim);
  const std::vector<float> ei = GenerateNormalBank(p.seed, item_stream, size_t(k) * dim);
  const Mixture q = View(shape, query), x = View(shape, item);
  const int c_count = static_cast<int>(q.weight.size());
  const int per = k / c_count;
  double total = 0;
  for (int c = 0; c < c_count; ++c) {
    for (int c2 = 0; c2 < c_count; ++c2) {
      double pair_mean = 0;
      for (int s = 0; s < per; ++s) {
        for (int t = 0; t < per; ++t) {
          const int i = c * per + s, j = c2 * per + t;
          double sq = 0;
          for (int d = 0; d < dim; ++d) {
            const double z1 = q.mean[c][d] + std::sqrt(q.var[c][d]) * eq[i * dim + d];
            const double z2 = x.mean[c2][d] + std::sqrt(x.var[c2][d]) * ei[j * dim + d];
            sq += (z1 - z2) * (z1 - z2);
          }
          pair_mean += Sigmoid(-p.match_a * std::sqrt(sq) + p.match_b);
        }
      }
      total += q.weight[c] * x.weight[c2] * pair_mean / (double(per) * per);
    }
  }
  return total;
}

TEST(McScoreTest, GaussianMatchesDirectEq5) {
  const RowShape shape = Shape(Kind::kGaussian, 10);
  const ScoreParams params = Params(ScoreType::kMc, 8, 77, 1.5f, 2.0f);
  std::mt19937_64 rng(1);
  const size_t n = 21;
  const std::vector<float> items = RandomRows(shape, n, 0, &rng, 0.5f);
  const std::vector<float> query = RandomRow(shape, &rng, 0.5f);
  const std::vector<float> got = ScoreAll(shape, params, query, items, n);
  for (size_t r = 0; r < n; ++r) {
    const double expected =
        DirectMc(shape, params, query.data(), items.data() + r * shape.item_row_size());
    EXPECT_NEAR(got[r], expected, 1e-5) << r;
  }
}

TEST(McScoreTest, MogUnequalWeightsMatchesDirectEq5) {
  const RowShape shape = Shape(Kind::kMog, 6, 3);
  const ScoreParams params = Params(ScoreType::kMc, 12, 5, 1.0f, 1.0f);
  std::mt19937_64 rng(2);
  const size_t n = 19;
  const std::vector<float> items = RandomRows(shape, n, 0, &rng, 1.0f);
  const std::vector<float> query = RandomRow(shape, &rng, 1.0f);
  const std::vector<float> got = ScoreAll(shape, params, query, items, n);
  for (size_t r = 0; r < n; ++r) {
    const float* item = items.data() + r * shape.item_row_size();
    EXPECT_NEAR(got[r], DirectMc(shape, params, query.data(), item), 1e-5) << r;
  }
  // The weights matter: uniform weights give a different score.
  std::vector<float> uniform_items = items;
  for (size_t r = 0; r < n; ++r) {
    for (int c = 0; c < 3; ++c) uniform_items[r * shape.item_row_size() + c] = 1.0f / 3;
  }
  const std::vector<float> uniform = ScoreAll(shape, params, query, uniform_items, n);
  int differ = 0;
  for (size_t r = 0; r < n; ++r) differ += std::fabs(uniform[r] - got[r]) > 1e-4f;
  EXPECT_GT(differ, static_cast<int>(n) / 2);
}

TEST(McScoreTest, DeterministicForASeedAndChangesWithIt) {
  for (Kind kind : {Kind::kGaussian, Kind::kMog}) {
    const RowShape shape = Shape(kind, 16, 2);
    std::mt19937_64 rng(8);
    const size_t n = 30;
    const std::vector<float> items = RandomRows(shape, n, 0, &rng, 0.3f, 1.0f);
    const std::vector<float> query = RandomRow(shape, &rng, 0.3f, 1.0f);
    const std::vector<float> first =
        ScoreAll(shape, Params(ScoreType::kMc, 8, 123), query, items, n);
    const std::vector<float> again =
        ScoreAll(shape, Params(ScoreType::kMc, 8, 123), query, items, n);
    const std::vector<float> other =
        ScoreAll(shape, Params(ScoreType::kMc, 8, 124), query, items, n);
    ASSERT_EQ(first.size(), n);
    int changed = 0;
    for (size_t r = 0; r < n; ++r) {
      EXPECT_EQ(first[r], again[r]) << r;  // bitwise
      changed += first[r] != other[r];
    }
    EXPECT_EQ(changed, static_cast<int>(n)) << KindName(kind);
  }
}

TEST(McScoreTest, TinyVarianceEqualsMatchOnMeans) {
  const RowShape shape = Shape(Kind::kGaussian, 12);
  std::mt19937_64 rng(3);
  const size_t n = 10;
  const std::vector<float> items = RandomRows(shape, n, 0, &rng, 0.4f, 1e-12f);
  const std::vector<float> query = RandomRow(shape, &rng, 0.4f, 1e-12f);
  const std::vector<float> mc =
      ScoreAll(shape, Params(ScoreType::kMc, 8, 1, 3.0f, 2.0f), query, items, n);
  const std::vector<float> match =
      ScoreAll(shape, Params(ScoreType::kMatch, 8, 1, 3.0f, 2.0f), query, items, n);
  for (size_t r = 0; r < n; ++r) EXPECT_NEAR(mc[r], match[r], 2e-5f) << r;
}

// K = 512 per side against an independent brute-force estimate: fresh pairs
// from std::normal_distribution. Each seed's estimate is a V-statistic with
// variance <= Var(p) (2/K + 1/K^2); the mean over kSeeds independent banks
// divides that by kSeeds; brute force has Var(p)/N. Five combined standard
// errors.
void ExpectConvergence(const RowShape& shape, uint64_t seed) {
  const int samples = 512;
  constexpr int kSeeds = 8;
  std::mt19937_64 rng(seed);
  const size_t n = 3;
  const std::vector<float> items = RandomRows(shape, n, 0, &rng, 0.6f, 0.8f);
  const std::vector<float> query = RandomRow(shape, &rng, 0.6f, 0.8f);
  const float a = 1.0f, b = 1.5f;
  std::vector<double> estimate(n, 0.0);
  for (int s = 0; s < kSeeds; ++s) {
    const ScoreParams params = Params(ScoreType::kMc, samples, seed * 100 + s, a, b);
    const std::vector<float> got = ScoreAll(shape, params, query, items, n);
    ASSERT_EQ(got.size(), n);
    for (size_t r = 0; r < n; ++r) estimate[r] += got[r] / kSeeds;
  }
  std::mt19937_64 brute_rng(seed + 1000);
  std::normal_distribution<double> normal;
  const Mixture q = View(shape, query.data());
  std::discrete_distribution<int> pick_q(q.weight.begin(), q.weight.end());
  for (size_t r = 0; r < n; ++r) {
    const Mixture x = View(shape, items.data() + r * shape.item_row_size());
    std::discrete_distribution<int> pick_x(x.weight.begin(), x.weight.end());
    const int draws = 1000000;
    double sum = 0, sum2 = 0;
    for (int t = 0; t < draws; ++t) {
      const int c = pick_q(brute_rng), c2 = pick_x(brute_rng);
      double sq = 0;
      for (int d = 0; d < shape.dim; ++d) {
        const double z1 = q.mean[c][d] + std::sqrt(q.var[c][d]) * normal(brute_rng);
        const double z2 = x.mean[c2][d] + std::sqrt(x.var[c2][d]) * normal(brute_rng);
        sq += (z1 - z2) * (z1 - z2);
      }
      const double p = Sigmoid(-a * std::sqrt(sq) + b);
      sum += p;
      sum2 += p * p;
    }
    const double mean = sum / draws, var = sum2 / draws - mean * mean;
    ASSERT_GT(var, 0.0);
    const double se =
        std::sqrt(var * (2.0 / samples + 1.0 / (double(samples) * samples)) / kSeeds + var / draws);
    EXPECT_NEAR(estimate[r], mean, 5 * se) << KindName(shape.kind) << " row " << r << " se " << se;
  }
}

TEST(McScoreTest, ConvergesToBruteForceGaussian) {
  ExpectConvergence(Shape(Kind::kGaussian, 4), 10);
}

TEST(McScoreTest, ConvergesToBruteForceMogUnequalWeights) {
  ExpectConvergence(Shape(Kind::kMog, 3, 2), 11);
}

// ---------------------------------------------------------------------------
// Uncertainty (HIB eq. 9).

TEST(UncertaintyTest, MatchesDirectSelfMismatch) {
  for (Kind kind : {Kind::kGaussian, Kind::kMog}) {
    const RowShape shape = Shape(kind, 9, 2);
    const ScoreParams params = Params(ScoreType::kCsd, 8, 3, 1.2f, 0.5f);
    std::mt19937_64 rng(12);
    for (int t = 0; t < 5; ++t) {
      const std::vector<float> row = RandomRow(shape, &rng, 1.0f, 0.5f);
      const double expected =
          1.0 - DirectMc(shape, params, row.data(), row.data(), kEtaFirstStream, kEtaSecondStream);
      const float eta = Uncertainty(shape, params, row.data());
      EXPECT_NEAR(eta, expected, 1e-5) << KindName(kind);
      EXPECT_GE(eta, 0.0f);
      EXPECT_LE(eta, 1.0f);
      EXPECT_EQ(eta, Uncertainty(shape, params, row.data()));  // deterministic
    }
  }
}

TEST(UncertaintyTest, GrowsWithVariance) {
  for (Kind kind : {Kind::kGaussian, Kind::kMog}) {
    const RowShape shape = Shape(kind, 8, 2);
    const ScoreParams params = Params(ScoreType::kMc, 8, 0, 1.0f, 2.0f);
    std::mt19937_64 rng(13);
    std::vector<float> row = RandomRow(shape, &rng, 1.0f, 0.01f);
    const int c_count = kind == Kind::kMog ? 2 : 1;
    const size_t var_offset = kind == Kind::kMog ? c_count + c_count * 8 : 8;
    float previous = -1.0f;
    for (float scale : {1.0f, 4.0f, 16.0f, 64.0f, 256.0f}) {
      std::vector<float> scaled = row;
      for (size_t i = var_offset; i < scaled.size(); ++i) scaled[i] *= scale;
      const float eta = Uncertainty(shape, params, scaled.data());
      EXPECT_GT(eta, previous) << KindName(kind) << " scale " << scale;
      EXPECT_GE(eta, 0.0f);
      EXPECT_LE(eta, 1.0f);
      previous = eta;
    }
    EXPECT_GT(previous, 0.5f);
  }
}

TEST(UncertaintyTest, NanWithoutADistribution) {
  const float point[3] = {1, 2, 3};
  EXPECT_TRUE(std::isnan(Uncertainty(Shape(Kind::kPoint, 3), Params(ScoreType::kMatch), point)));
  EXPECT_TRUE(
      std::isnan(Uncertainty(Shape(Kind::kCodes, 3, 1, 4), Params(ScoreType::kLogprob), point)));
}

TEST(UncertaintyTest, RowsNanWithoutADistribution) {
  const float rows[6] = {1, 2, 3, 4, 5, 6};
  const int64_t ids[2] = {0, 1};
  float out[2] = {0, 0};
  UncertaintyRows(Shape(Kind::kPoint, 3), Params(ScoreType::kMatch), rows, 3 * sizeof(float), ids,
                  2, out);
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
  out[0] = out[1] = 0;
  UncertaintyRows(Shape(Kind::kCodes, 3, 1, 4), Params(ScoreType::kLogprob), rows,
                  3 * sizeof(float), ids, 1, out);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 0.0f);  // only n entries are written
}

// ---------------------------------------------------------------------------
// DIMCO.

TEST(LogprobScoreTest, SumsTheTableAtTheCode) {
  const int d = 20, k = 8;
  const RowShape shape = Shape(Kind::kCodes, d, 1, k);
  std::mt19937_64 rng(14);
  std::uniform_real_distribution<float> uniform(0.01f, 1.0f);
  // Rows of the table are log-softmax outputs.
  std::vector<float> table(size_t(d) * k);
  for (int i = 0; i < d; ++i) {
    double norm = 0;
    for (int j = 0; j < k; ++j) norm += (table[i * k + j] = uniform(rng));
    for (int j = 0; j < k; ++j) table[i * k + j] = std::log(table[i * k + j] / norm);
  }
  const size_t n = 40, stride = d + 4;
  std::vector<uint8_t> codes(n * stride, 0);
  std::uniform_int_distribution<int> symbol(0, k - 1);
  for (auto& c : codes) c = static_cast<uint8_t>(symbol(rng));
  std::unique_ptr<PreparedQuery> prepared;
  ASSERT_TRUE(PrepareQuery(shape, Params(ScoreType::kDefault), table.data(), &prepared).ok());
  const std::vector<int64_t> rows = Iota(n);
  std::vector<float> out(n);
  prepared->ScoreRows(codes.data(), stride, rows.data(), n, out.data());
  for (size_t r = 0; r < n; ++r) {
    double expected = 0;
    for (int i = 0; i < d; ++i) expected += table[i * k + codes[r * stride + i]];
    EXPECT_NEAR(out[r], expected, 1e-4) << r;
    EXPECT_LT(out[r], 0.0f);
  }
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
