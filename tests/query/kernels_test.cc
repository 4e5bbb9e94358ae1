// The SIMD kernels on every ISA path this CPU supports, against the scalar
// reference loops and std::exp.
#include "query/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "query/code_scan.h"
#include "query/scalar_reference.h"
#include "query/scorer.h"
#include "tests/kernel_isas.h"
#include "tests/query/test_rows.h"

namespace hedgedb {
namespace query {
namespace {

using testing_rows::Iota;
using testing_rows::RandomCodes;
using testing_rows::RandomRows;

using testing_util::KernelIsaParamName;
using testing_util::ScopedKernelIsa;
using testing_util::SupportedKernelIsas;

// Runs the test body with the kernels forced to one ISA, restoring afterwards.
class KernelIsaTest : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override { ASSERT_TRUE(forced_.ok()); }

 private:
  ScopedKernelIsa forced_{GetParam()};
};

TEST(NormalBankTest, DeterministicAndPrefixStable) {
  const std::vector<float> a = GenerateNormalBank(42, 1, 1001);
  const std::vector<float> b = GenerateNormalBank(42, 1, 1001);
  const std::vector<float> prefix = GenerateNormalBank(42, 1, 37);
  ASSERT_EQ(a.size(), 1001u);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  for (size_t i = 0; i < prefix.size(); ++i) EXPECT_EQ(prefix[i], a[i]) << i;
  EXPECT_EQ(CachedNormalBank(42, 1, 1001), a);
}

TEST(NormalBankTest, SeedsAndStreamsDiffer) {
  const std::vector<float> base = GenerateNormalBank(1, 1, 64);
  const std::vector<float> other_seed = GenerateNormalBank(2, 1, 64);
  const std::vector<float> other_stream = GenerateNormalBank(1, 2, 64);
  int same_seed = 0, same_stream = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    same_seed += base[i] == other_seed[i];
    same_stream += base[i] == other_stream[i];
  }
  EXPECT_EQ(same_seed, 0);
  EXPECT_EQ(same_stream, 0);
}

TEST(NormalBankTest, MomentsAreStandardNormal) {
  const size_t n = 200000;
  const std::vector<float> bank = GenerateNormalBank(7, 3, n);
  double sum = 0, sum2 = 0, sum4 = 0, below = 0;
  for (float v : bank) {
    sum += v;
    sum2 += double(v) * v;
    sum4 += double(v) * v * v * v;
    below += v < -1.0f;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  // Five standard errors: mean sd 1/sqrt(n), variance sd sqrt(2/n), kurtosis sd sqrt(96/n).
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(double(n)));
  EXPECT_NEAR(var, 1.0, 5.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(sum4 / n, 3.0, 5.0 * std::sqrt(96.0 / n));
  // P(Z < -1) = 0.158655.
  EXPECT_NEAR(below / n, 0.158655, 5.0 * std::sqrt(0.158655 * 0.841345 / n));
}

TEST_P(KernelIsaTest, FastExpRelativeError) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.0; v += 0.001) x.push_back(static_cast<float>(v));
  x.push_back(0.0f);
  x.push_back(-1e-7f);
  std::vector<float> y(x.size());
  FastExp(x.data(), x.size(), y.data());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::fabs(y[i] - exact) / exact);
  }
  EXPECT_LT(worst, 1e-6) << KernelIsaName(GetParam());
  // Out of range inputs are clamped, never inf or NaN.
  const float extremes[2] = {-1000.0f, 1000.0f};
  float clamped[2];
  FastExp(extremes, 2, clamped);
  EXPECT_GT(clamped[0], 0.0f);
  EXPECT_LT(clamped[0], 1e-37f);
  EXPECT_TRUE(std::isfinite(clamped[1]));
  EXPECT_GT(clamped[1], 1e38f);
}

// FastLog against std::log in double over the whole positive float range,
// subnormals included: absolute error below 2^-23 (1 + |ln x|).
TEST_P(KernelIsaTest, FastLogAbsoluteError) {
  std::vector<float> x;
  for (double v = -103.0; v <= 88.7; v += 0.0007) x.push_back(float(std::exp(v)));
  for (float v = 0.5f; v < 2.0f; v += 1e-5f) x.push_back(v);  // near ln = 0
  x.push_back(std::numeric_limits<float>::denorm_min());
  x.push_back(std::numeric_limits<float>::min());
  x.push_back(std::numeric_limits<float>::max());
  x.push_back(1.41421354f);
  x.push_back(1.41421366f);
  std::vector<float> y(x.size());
  FastLog(x.data(), x.size(), y.data());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = std::log(double(x[i]));
    worst = std::max(worst, std::fabs(y[i] - exact) / (1.0 + std::fabs(exact)));
  }
  EXPECT_LT(worst, std::ldexp(1.0, -23)) << KernelIsaName(GetParam());
}

// The closed-form scores (csd, mls, l2, match) on this ISA against the
// scalar double reference (ScalarMomentScoreRows), on odd dimensions and
// variances log-uniform over [1e-6, 1e6]. Tolerance: the float32 path rounds
// each term a few times (difference, sum of variances, quotient, product of
// mantissas, FastLog, moments of a mixture) and sums a lane's ceil(D/L)
// terms, then L lanes in a tree; with L >= 8 that is at most
// (ceil(D/8) + 3 + 8) u times A, u = 2^-24, where A bounds the magnitudes
// summed: per dimension (|mu_q| + |mu|)^2 / s + |ln s| + 1 for mls
// ((|mu_q| + |mu|)^2 + var_q + var for csd and the squared distance; the
// means, not their difference, because a mixture's moments are rounded to
// float). mls's sum is halved; l2 is a square root (relative error halves);
// match is a sigmoid of slope <= a/4; plus the float result's own rounding.
void ExpectMomentScoresMatchReference(const RowShape& shape, size_t n, std::mt19937_64* rng,
                                      float min_var, float max_var, float mean_scale = 1.0f) {
  const size_t pad = 3, stride = shape.item_row_size() + pad;
  std::vector<float> items = RandomRows(shape, n, pad, rng, mean_scale);
  std::vector<float> query = testing_rows::RandomRow(shape, rng, mean_scale);
  if (shape.kind != Kind::kPoint) {
    std::uniform_real_distribution<double> log_var(std::log(min_var), std::log(max_var));
    const size_t first = shape.var_offset(), count = shape.mixture_components() * shape.dim;
    for (size_t r = 0; r <= n; ++r) {
      float* row = r < n ? items.data() + r * stride : query.data();
      for (size_t j = 0; j < count; ++j) row[first + j] = float(std::exp(log_var(*rng)));
    }
  }
  std::vector<int64_t> rows = Iota(n);
  std::shuffle(rows.begin(), rows.end(), *rng);
  const int dim = shape.dim;
  std::vector<double> qm(dim), qv(dim, 0.0), m(dim), v(dim, 0.0);
  if (shape.kind == Kind::kPoint) {
    for (int d = 0; d < dim; ++d) qm[d] = query[d];
  } else {
    RowMoments(shape, query.data(), qm.data(), qv.data());
  }
  const double u = std::ldexp(1.0, -24);
  const double per_term = std::ceil(dim / 8.0) + 3 + 8;
  for (ScoreType score : {ScoreType::kCsd, ScoreType::kMls, ScoreType::kL2, ScoreType::kMatch}) {
    if (shape.kind == Kind::kPoint && (score == ScoreType::kCsd || score == ScoreType::kMls)) {
      continue;
    }
    ScoreParams params;
    params.score = score;
    params.samples = 4 * int(shape.mixture_components());
    params.match_a = 0.7f;
    params.match_b = 2.0f;
    std::unique_ptr<PreparedQuery> prepared;
    ASSERT_TRUE(PrepareQuery(shape, params, query.data(), &prepared).ok());
    std::vector<float> got(n), want(n);
    prepared->ScoreRows(items.data(), stride * sizeof(float), rows.data(), n, got.data());
    ASSERT_TRUE(ScalarMomentScoreRows(shape, params, query.data(), items.data(),
                                      stride * sizeof(float), rows.data(), n, want.data())
                    .ok());
    for (size_t r = 0; r < n; ++r) {
      const float* row = items.data() + rows[r] * stride;
      if (shape.kind == Kind::kPoint) {
        for (int d = 0; d < dim; ++d) m[d] = row[d];
      } else {
        RowMoments(shape, row, m.data(), v.data());
      }
      double magnitude = 0.0, sq = 0.0;
      for (int d = 0; d < dim; ++d) {
        const double span = std::pow(std::fabs(qm[d]) + std::fabs(m[d]), 2);
        const double s = qv[d] + v[d];
        magnitude += score == ScoreType::kMls ? span / s + std::fabs(std::log(s)) + 1.0
                                              : span + qv[d] + v[d];
        sq += std::pow(qm[d] - m[d], 2);
      }
      double tol = per_term * u * magnitude;
      if (score == ScoreType::kMls) tol *= 0.5;
      if (score == ScoreType::kL2) tol = 0.5 * tol / std::max(std::sqrt(sq), 1e-30);
      if (score == ScoreType::kMatch) tol = 0.25 * params.match_a * 0.5 * tol / std::sqrt(sq);
      tol += 2 * u * (std::fabs(want[r]) + 1.0);
      EXPECT_NEAR(got[r], want[r], tol)
          << KindName(shape.kind) << " " << ScoreName(score) << " D=" << dim << " vars [" << min_var
          << ", " << max_var << "] row " << rows[r];
    }
  }
}

TEST_P(KernelIsaTest, MomentScoresMatchScalarReference) {
  std::mt19937_64 rng(17);
  for (int dim : {1, 3, 17, 63, 64, 65, 130}) {
    const RowShape gaussian{Kind::kGaussian, dim, 1, 0};
    ExpectMomentScoresMatchReference(gaussian, 29, &rng, 1e-6f, 1e6f);
    ExpectMomentScoresMatchReference(gaussian, 29, &rng, 0.05f, 0.5f);
    ExpectMomentScoresMatchReference({Kind::kMog, dim, 3, 0}, 13, &rng, 1e-6f, 1e6f);
    ExpectMomentScoresMatchReference({Kind::kPoint, dim, 1, 0}, 13, &rng, 1.0f, 1.0f);
  }
  // Subnormal variances (the mantissa split normalises them first), with
  // means close enough that the quotients stay finite.
  ExpectMomentScoresMatchReference({Kind::kGaussian, 20, 1, 0}, 9, &rng, 1e-44f, 1e-39f, 1e-21f);
}

// 4,000 dimensions of variances whose sums have mantissa 1.9: a lane's
// product of mantissas (250 factors at 16 lanes, 1.9^250 = 2^231) would
// pass 2^128 without the renormalisation.
TEST_P(KernelIsaTest, MlsRenormalisesLongMantissaProducts) {
  const RowShape shape{Kind::kGaussian, 4000, 1, 0};
  std::mt19937_64 rng(5);
  std::vector<float> items = RandomRows(shape, 3, 0, &rng);
  std::vector<float> query = testing_rows::RandomRow(shape, &rng);
  for (int d = 0; d < shape.dim; ++d) {
    query[shape.dim + d] = 0.95f;
    for (int r = 0; r < 3; ++r) items[r * shape.item_row_size() + shape.dim + d] = 0.95f;
  }
  ScoreParams params;
  params.score = ScoreType::kMls;
  std::unique_ptr<PreparedQuery> prepared;
  ASSERT_TRUE(PrepareQuery(shape, params, query.data(), &prepared).ok());
  const std::vector<int64_t> rows = Iota(3);
  std::vector<float> got(3), want(3);
  prepared->ScoreRows(items.data(), shape.item_row_bytes(), rows.data(), 3, got.data());
  ASSERT_TRUE(ScalarMomentScoreRows(shape, params, query.data(), items.data(),
                                    shape.item_row_bytes(), rows.data(), 3, want.data())
                  .ok());
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(std::isfinite(got[r])) << r;
    EXPECT_NEAR(got[r], want[r], 1e-5 * std::fabs(want[r])) << r;
  }
}

struct McCase {
  Kind kind;
  int dim;
  int components;
  int samples;
};

void ExpectMcMatchesScalar(const McCase& c, uint64_t seed) {
  RowShape shape;
  shape.kind = c.kind;
  shape.dim = c.dim;
  shape.components = c.components;
  ScoreParams params;
  params.samples = c.samples;
  params.seed = seed;
  params.match_a = 1.7f;
  params.match_b = 0.8f;
  std::mt19937_64 rng(seed * 31 + c.dim);
  const size_t n = 37;  // not a multiple of any lane count
  const size_t pad = 3;
  const size_t stride = shape.item_row_size() + pad;
  const std::vector<float> items = RandomRows(shape, n, pad, &rng, 0.7f);
  const std::vector<float> query = testing_rows::RandomRow(shape, &rng, 0.7f);
  std::unique_ptr<PreparedQuery> prepared;
  ASSERT_TRUE(PrepareQuery(shape, params, query.data(), &prepared).ok());
  // Rows out of order and repeated.
  std::vector<int64_t> rows = Iota(n);
  std::reverse(rows.begin(), rows.end());
  rows.push_back(5);
  std::vector<float> out(rows.size());
  prepared->ScoreRows(items.data(), stride * sizeof(float), rows.data(), rows.size(), out.data());
  const ScalarMcReference reference(shape, params, query.data());
  for (size_t r = 0; r < rows.size(); ++r) {
    const float expected = reference.Score(items.data() + rows[r] * stride);
    EXPECT_NEAR(out[r], expected, 2e-5f + 1e-4f * expected)
        << "kind " << KindName(c.kind) << " D=" << c.dim << " K=" << c.samples << " row " << r;
  }
}

TEST_P(KernelIsaTest, McGaussianMatchesScalarReference) {
  for (int dim : {1, 3, 16, 17, 64}) {
    for (int samples : {1, 3, 8, 11}) {
      ExpectMcMatchesScalar({Kind::kGaussian, dim, 1, samples}, 5);
    }
  }
}

TEST_P(KernelIsaTest, McMogMatchesScalarReference) {
  ExpectMcMatchesScalar({Kind::kMog, 64, 2, 8}, 9);
  ExpectMcMatchesScalar({Kind::kMog, 5, 3, 12}, 9);
  ExpectMcMatchesScalar({Kind::kMog, 20, 1, 4}, 9);
  ExpectMcMatchesScalar({Kind::kMog, 33, 4, 40}, 9);
}

TEST_P(KernelIsaTest, McRowScoreDoesNotDependOnTheBatch) {
  RowShape shape{Kind::kGaussian, 64, 1, 0};
  ScoreParams params;
  std::mt19937_64 rng(3);
  const std::vector<float> items = RandomRows(shape, 50, 0, &rng);
  const std::vector<float> query = testing_rows::RandomRow(shape, &rng);
  std::unique_ptr<PreparedQuery> prepared;
  ASSERT_TRUE(PrepareQuery(shape, params, query.data(), &prepared).ok());
  const std::vector<int64_t> all = Iota(50);
  std::vector<float> batch(50);
  prepared->ScoreRows(items.data(), shape.item_row_size() * sizeof(float), all.data(), 50,
                      batch.data());
  for (int64_t r : {0, 17, 49}) {
    float alone = 0;
    prepared->ScoreRows(items.data(), shape.item_row_size() * sizeof(float), &r, 1, &alone);
    EXPECT_EQ(alone, batch[r]) << r;  // bitwise
  }
}

// Scoring several queries over the same rows together (an exhaustive batch)
// gives each query its own call's numbers, bitwise, for every kind and score,
// on odd dimensions and row counts, rows out of order and repeated, rows
// strided with padding, and a column stride wider than the rows.
TEST_P(KernelIsaTest, SharedScoringEqualsOneQueryAtATime) {
  struct Case {
    RowShape shape;
    ScoreType score;
    int samples;
  };
  const std::vector<Case> cases = {
      {{Kind::kGaussian, 64, 1, 0}, ScoreType::kMc, 8},
      {{Kind::kGaussian, 17, 1, 0}, ScoreType::kMc, 11},
      {{Kind::kMog, 33, 3, 0}, ScoreType::kMc, 12},
      {{Kind::kGaussian, 65, 1, 0}, ScoreType::kMls, 8},
      {{Kind::kGaussian, 3, 1, 0}, ScoreType::kCsd, 8},
      {{Kind::kGaussian, 20, 1, 0}, ScoreType::kMatch, 8},
      {{Kind::kPoint, 31, 1, 0}, ScoreType::kL2, 8},
      {{Kind::kMog, 16, 2, 0}, ScoreType::kMls, 8},
      {{Kind::kCodes, 16, 1, 8}, ScoreType::kLogprob, 8},
  };
  std::mt19937_64 rng(23);
  for (const Case& c : cases) {
    for (size_t n : {size_t(1), size_t(16), size_t(53)}) {
      SCOPED_TRACE(::testing::Message() << KindName(c.shape.kind) << " " << ScoreName(c.score)
                                        << " D=" << c.shape.dim << " n=" << n);
      ScoreParams params;
      params.score = c.score;
      params.samples = c.samples;
      params.seed = 7;
      params.match_a = 1.3f;
      params.match_b = 2.0f;
      const size_t pad = 5;
      std::vector<int64_t> rows = Iota(n);
      std::shuffle(rows.begin(), rows.end(), rng);
      rows.push_back(0);
      const size_t m = rows.size();
      std::vector<std::unique_ptr<PreparedQuery>> prepared;
      std::vector<const PreparedQuery*> queries;
      std::vector<std::vector<float>> query_rows;
      std::vector<float> items;
      size_t stride_bytes = 0;
      if (c.shape.kind == Kind::kCodes) {
        stride_bytes = c.shape.item_row_bytes() + pad;
        const std::vector<uint8_t> codes =
            RandomCodes(n, c.shape.dim, c.shape.code_k, stride_bytes, &rng);
        items.resize((codes.size() + 3) / 4);
        std::memcpy(items.data(), codes.data(), codes.size());
      } else {
        items = RandomRows(c.shape, n, pad, &rng);
        stride_bytes = (c.shape.item_row_size() + pad) * sizeof(float);
      }
      for (int j = 0; j < 5; ++j) {
        if (c.shape.kind == Kind::kCodes) {
          // A d x k table of log-probabilities (any floats score).
          std::normal_distribution<float> normal(-2.0f, 1.0f);
          std::vector<float> table(c.shape.query_row_size());
          for (float& v : table) v = normal(rng);
          query_rows.push_back(table);
        } else {
          query_rows.push_back(testing_rows::RandomRow(c.shape, &rng));
        }
        prepared.emplace_back();
        ASSERT_TRUE(PrepareQuery(c.shape, params, query_rows.back().data(), &prepared.back()).ok());
        queries.push_back(prepared.back().get());
      }
      const size_t out_stride = m + 3;
      std::vector<float> shared(queries.size() * out_stride, -7.0f);
      ScoreRowsShared(queries.data(), queries.size(), items.data(), stride_bytes, rows.data(), m,
                      shared.data(), out_stride);
      for (size_t j = 0; j < queries.size(); ++j) {
        std::vector<float> alone(m);
        queries[j]->ScoreRows(items.data(), stride_bytes, rows.data(), m, alone.data());
        for (size_t r = 0; r < m; ++r) {
          ASSERT_EQ(shared[j * out_stride + r], alone[r]) << "query " << j << " row " << r;
        }
        for (size_t r = m; r < out_stride; ++r) {
          ASSERT_EQ(shared[j * out_stride + r], -7.0f) << "wrote past its rows";
        }
      }
    }
  }
}

// Every DIMCO scan kernel this CPU runs, on random tables and codes at the
// row stride of the store plus padding, rows in random order, odd item counts
// (partial vectors and blocks). Kernels that sum each item in dimension order
// must equal ScalarCodeScore bitwise; blocked and avx512-gather-dims reorder
// the sum, so they get the worst-case bound of any summation order against the reference: 2 d 2^-24
// sum |terms|.
TEST(CodeScanTest, EveryKernelMatchesScalarReference) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(-3.0f, 1.0f);
  for (int ki = 0; ki < kCodeScanKernelCount; ++ki) {
    const CodeScanKernel kernel = static_cast<CodeScanKernel>(ki);
    if (!CodeScanKernelSupported(kernel)) continue;
    const bool same_order =
        kernel != CodeScanKernel::kBlocked && kernel != CodeScanKernel::kAvx512GatherDims;
    for (int k : {2, 16, 256}) {
      for (int d : {1, 7, 64, 256}) {
        std::vector<float> table(static_cast<size_t>(d) * k);
        for (auto& v : table) v = normal(rng);
        for (size_t n : {1, 15, 203, 301}) {
          const size_t stride = d + 5;
          const std::vector<uint8_t> codes = RandomCodes(n, d, k, stride, &rng);
          std::vector<int64_t> rows = Iota(n);
          std::shuffle(rows.begin(), rows.end(), rng);
          std::vector<float> out(n);
          CodeScanRowsWith(kernel, table.data(), d, k, codes.data(), stride, rows.data(), n,
                           out.data());
          for (size_t r = 0; r < n; ++r) {
            const uint8_t* code = codes.data() + rows[r] * stride;
            const float expected = ScalarCodeScore(table.data(), d, k, code);
            if (same_order) {
              ASSERT_EQ(out[r], expected) << CodeScanKernelName(kernel) << " d=" << d << " k=" << k
                                          << " n=" << n << " row " << r;
            } else {
              double abs_sum = 0;
              for (int i = 0; i < d; ++i) abs_sum += std::fabs(table[i * k + code[i]]);
              ASSERT_NEAR(out[r], expected, d * std::ldexp(abs_sum, -23))
                  << CodeScanKernelName(kernel) << " d=" << d << " k=" << k << " n=" << n << " row "
                  << r;
            }
          }
        }
      }
    }
  }
}

TEST(CodeScanTest, DispatchHonoursForcedKernelAndPicksASupportedOne) {
  EXPECT_TRUE(CodeScanKernelSupported(MeasuredCodeScanKernel()));
  EXPECT_TRUE(CodeScanKernelSupported(ActiveCodeScanKernel()));
  const CodeScanKernel saved = ActiveCodeScanKernel();
  const std::vector<float> table = {1.0f,  2.0f,  4.0f,  8.0f,
                                    16.0f, 32.0f, 64.0f, 128.0f};  // d=4 k=2
  const std::vector<uint8_t> code = {1, 0, 1, 1};
  const int64_t row = 0;
  for (int ki = 0; ki < kCodeScanKernelCount; ++ki) {
    const CodeScanKernel kernel = static_cast<CodeScanKernel>(ki);
    CodeScanKernel parsed;
    ASSERT_TRUE(ParseCodeScanKernel(CodeScanKernelName(kernel), &parsed));
    EXPECT_EQ(parsed, kernel);
    if (!SetCodeScanKernel(kernel)) continue;
    EXPECT_EQ(ActiveCodeScanKernel(), kernel);
    float out = 0;
    CodeScanRows(table.data(), 4, 2, code.data(), 4, &row, 1, &out);
    EXPECT_EQ(out, 2.0f + 4.0f + 32.0f + 128.0f) << CodeScanKernelName(kernel);
  }
  CodeScanKernel unused;
  EXPECT_FALSE(ParseCodeScanKernel("no-such-kernel", &unused));
  ASSERT_TRUE(SetCodeScanKernel(saved));
}

// eta of every row, alone and in a batch, against the scalar loop scoring
// the row's first eta sample set against its second.
TEST_P(KernelIsaTest, UncertaintyRowsMatchScalarReference) {
  for (const McCase& c : {McCase{Kind::kGaussian, 64, 1, 8}, McCase{Kind::kGaussian, 3, 1, 5},
                          McCase{Kind::kGaussian, 17, 1, 12}, McCase{Kind::kMog, 20, 2, 8},
                          McCase{Kind::kMog, 5, 3, 12}, McCase{Kind::kMog, 33, 2, 22}}) {
    RowShape shape;
    shape.kind = c.kind;
    shape.dim = c.dim;
    shape.components = c.components;
    ScoreParams params;
    params.samples = c.samples;
    params.seed = 4;
    params.match_a = 0.9f;
    params.match_b = 1.5f;
    std::mt19937_64 rng(c.dim);
    const size_t n = 21, pad = 1, stride = shape.item_row_size() + pad;
    const std::vector<float> items = RandomRows(shape, n, pad, &rng, 1.0f, 0.5f);
    std::vector<int64_t> rows = Iota(n);
    std::shuffle(rows.begin(), rows.end(), rng);
    std::vector<float> batch(n);
    UncertaintyRows(shape, params, items.data(), stride * sizeof(float), rows.data(), n,
                    batch.data());
    for (size_t r = 0; r < n; ++r) {
      const float* row = items.data() + rows[r] * stride;
      const ScalarMcReference self(shape, params, row, kEtaFirstStream, kEtaSecondStream);
      EXPECT_NEAR(batch[r], 1.0f - self.Score(row), 2e-5f)
          << KindName(c.kind) << " D=" << c.dim << " row " << r;
      EXPECT_EQ(batch[r], Uncertainty(shape, params, row)) << r;  // bitwise
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, KernelIsaTest, ::testing::ValuesIn(SupportedKernelIsas()),
                         KernelIsaParamName);

// The flags of the first processor in /proc/cpuinfo (empty elsewhere): the
// kernel's view of the CPU, independent of __builtin_cpu_supports.
std::set<std::string> CpuinfoFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    return std::set<std::string>(std::istream_iterator<std::string>(words),
                                 std::istream_iterator<std::string>());
  }
  return {};
}

TEST(KernelIsaDispatchTest, DetectsAvx512OnThisMachineClass) {
  // The CI machines have AVX-512 F and BW; a silent fall back to the portable
  // path would cost an order of magnitude. Every x86-64 build with GCC or
  // clang (the fuzz and clang builds too) has the x86 kernels.
#if defined(__x86_64__)
  EXPECT_TRUE(KernelIsaBuilt(KernelIsa::kAvx2));
  EXPECT_TRUE(KernelIsaBuilt(KernelIsa::kAvx512));
#endif
  if (!KernelIsaBuilt(KernelIsa::kAvx512)) GTEST_SKIP() << "build without the x86 kernels";
  const std::set<std::string> flags = CpuinfoFlags();
  for (const char* flag : {"avx2", "fma", "avx512f", "avx512bw"}) {
    if (flags.count(flag) == 0) GTEST_SKIP() << "CPU without " << flag;
  }
  EXPECT_EQ(DetectKernelIsa(), KernelIsa::kAvx512);
  EXPECT_EQ(ActiveKernelIsa(), KernelIsa::kAvx512);
  std::cout << "kernel level: " << KernelIsaName(ActiveKernelIsa()) << "\n";
}

// SetKernelIsa(kPortable) holds every family to portable code: the code scan
// leaves a forced gather kernel and its trial picks among the portable ones.
TEST(KernelIsaDispatchTest, CodeScanFollowsTheLevel) {
  const CodeScanKernel saved = ActiveCodeScanKernel();
  for (KernelIsa isa : SupportedKernelIsas()) {
    const ScopedKernelIsa forced(isa);
    ASSERT_TRUE(forced.ok());
    for (int ki = 0; ki < kCodeScanKernelCount; ++ki) {
      const CodeScanKernel kernel = static_cast<CodeScanKernel>(ki);
      const bool gather =
          kernel != CodeScanKernel::kBlocked && kernel != CodeScanKernel::kInterleaved;
      const KernelIsa needs = kernel == CodeScanKernel::kAvx2Gather ? KernelIsa::kAvx2
                              : gather                              ? KernelIsa::kAvx512
                                                                    : KernelIsa::kPortable;
      EXPECT_EQ(CodeScanKernelSupported(kernel), needs <= isa)
          << CodeScanKernelName(kernel) << " at " << KernelIsaName(isa);
    }
    const CodeScanKernel measured = MeasuredCodeScanKernel();
    EXPECT_TRUE(CodeScanKernelSupported(measured)) << CodeScanKernelName(measured);
    EXPECT_TRUE(CodeScanKernelSupported(ActiveCodeScanKernel()));
  }
  if (DetectKernelIsa() == KernelIsa::kAvx512) {
    // A gather forced at kAvx512 gives way to a portable kernel at kPortable
    // and comes back with the level.
    ASSERT_TRUE(SetCodeScanKernel(CodeScanKernel::kAvx512Gather));
    {
      const ScopedKernelIsa portable(KernelIsa::kPortable);
      const CodeScanKernel active = ActiveCodeScanKernel();
      EXPECT_TRUE(active == CodeScanKernel::kBlocked || active == CodeScanKernel::kInterleaved)
          << CodeScanKernelName(active);
      EXPECT_FALSE(SetCodeScanKernel(CodeScanKernel::kAvx2Gather));
    }
    EXPECT_EQ(ActiveCodeScanKernel(), CodeScanKernel::kAvx512Gather);
  }
  ASSERT_TRUE(SetCodeScanKernel(saved));
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
