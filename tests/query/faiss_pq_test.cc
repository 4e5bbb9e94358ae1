// The codes index (docs/concepts.md, "Two-stage search"): a FAISS IndexPQ with M = d sub-quantizers
// of dimension k, identity codebooks and METRIC_INNER_PRODUCT scores the flattened DIMCO table
// exactly as the scan does: sum_i L[i, c_i]. The index layer relies on it.
#include <faiss/IndexPQ.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "query/kernels.h"
#include "query/scalar_reference.h"

namespace hedgedb {
namespace query {
namespace {

using idx_t = faiss::Index::idx_t;

int Log2(int k) {
  int bits = 0;
  while ((1 << bits) < k) ++bits;
  return bits;
}

// IndexPQ over d*k-dimensional vectors whose codebooks are identities.
std::unique_ptr<faiss::IndexPQ> IdentityPq(int d, int k) {
  auto index = std::make_unique<faiss::IndexPQ>(d * k, d, Log2(k), faiss::METRIC_INNER_PRODUCT);
  auto& centroids = index->pq.centroids;
  centroids.assign(static_cast<size_t>(d) * k * k, 0.0f);
  for (int m = 0; m < d; ++m) {
    for (int j = 0; j < k; ++j) centroids[(static_cast<size_t>(m) * k + j) * k + j] = 1.0f;
  }
  index->is_trained = true;
  return index;
}

// Adds code rows as one-hot vectors: PQ encoding must map them to the codes.
void AddOneHot(faiss::IndexPQ* index, const std::vector<uint8_t>& codes, size_t n, int d, int k) {
  std::vector<float> one_hot(n * d * k, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    for (int i = 0; i < d; ++i) one_hot[(r * d + i) * k + codes[r * d + i]] = 1.0f;
  }
  index->add(static_cast<idx_t>(n), one_hot.data());
}

struct Scores {
  std::vector<float> faiss;  // by item id
  std::vector<float> scan;
};

Scores ScoreBoth(int d, int k, const std::vector<float>& table, const std::vector<uint8_t>& codes,
                 size_t n) {
  auto index = IdentityPq(d, k);
  AddOneHot(index.get(), codes, n, d, k);
  std::vector<float> distances(n);
  std::vector<idx_t> labels(n);
  index->search(1, table.data(), static_cast<idx_t>(n), distances.data(), labels.data());
  Scores scores;
  scores.faiss.assign(n, std::numeric_limits<float>::quiet_NaN());
  for (size_t r = 0; r < n; ++r) {
    if (labels[r] >= 0) scores.faiss[labels[r]] = distances[r];
  }
  std::vector<int64_t> rows(n);
  for (size_t r = 0; r < n; ++r) rows[r] = static_cast<int64_t>(r);
  scores.scan.resize(n);
  CodeScanRows(table.data(), d, k, codes.data(), d, rows.data(), n, scores.scan.data());
  return scores;
}

TEST(IdentityIndexPqTest, ExactlyTheScanOnDyadicTables) {
  // Multiples of 1/8 in [-16, 0]: every partial sum is exact, so any
  // summation order gives the same float.
  for (const auto& dk : std::vector<std::pair<int, int>>{{6, 16}, {17, 4}, {3, 256}}) {
    const int d = dk.first, k = dk.second;
    std::mt19937_64 rng(d * 1000 + k);
    std::uniform_int_distribution<int> eighths(-128, 0);
    std::vector<float> table(static_cast<size_t>(d) * k);
    for (auto& v : table) v = eighths(rng) / 8.0f;
    const size_t n = 50;
    std::vector<uint8_t> codes(n * d);
    std::uniform_int_distribution<int> symbol(0, k - 1);
    for (auto& c : codes) c = static_cast<uint8_t>(symbol(rng));
    const Scores scores = ScoreBoth(d, k, table, codes, n);
    for (size_t r = 0; r < n; ++r) {
      EXPECT_EQ(scores.faiss[r], scores.scan[r]) << "d=" << d << " k=" << k << " item " << r;
      EXPECT_EQ(scores.scan[r], ScalarCodeScore(table.data(), d, k, codes.data() + r * d));
    }
  }
}

TEST(IdentityIndexPqTest, SameScoresOnLogSoftmaxTables) {
  const int d = 32, k = 16;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> logits(0.0f, 2.0f);
  std::vector<float> table(static_cast<size_t>(d) * k);
  for (int i = 0; i < d; ++i) {
    double norm = 0;
    for (int j = 0; j < k; ++j) norm += std::exp(table[i * k + j] = logits(rng));
    for (int j = 0; j < k; ++j) table[i * k + j] -= static_cast<float>(std::log(norm));
  }
  const size_t n = 200;
  std::vector<uint8_t> codes(n * d);
  std::uniform_int_distribution<int> symbol(0, k - 1);
  for (auto& c : codes) c = static_cast<uint8_t>(symbol(rng));
  const Scores scores = ScoreBoth(d, k, table, codes, n);
  for (size_t r = 0; r < n; ++r) {
    EXPECT_NEAR(scores.faiss[r], scores.scan[r], 1e-5f * std::fabs(scores.scan[r])) << r;
  }
}

// A -inf in the table (log 0, or a "-inf padding" row of k) turns the
// identity-codebook inner products into 0 * -inf = NaN for the whole
// sub-quantizer, so FAISS needs a finite floor; the exact scan stays exact.
TEST(IdentityIndexPqTest, MinusInfinityNeedsAFiniteFloorForFaiss) {
  const int d = 4, k = 8;
  std::vector<float> table(static_cast<size_t>(d) * k, -1.0f);
  table[0 * k + 7] = -std::numeric_limits<float>::infinity();
  const std::vector<uint8_t> codes = {0, 1, 2, 3, 7, 1, 2, 3};
  Scores scores = ScoreBoth(d, k, table, codes, 2);
  EXPECT_EQ(scores.scan[0], -4.0f);
  EXPECT_EQ(scores.scan[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(scores.faiss[0]) || scores.faiss[0] != -4.0f);
  table[0 * k + 7] = -1e30f;
  scores = ScoreBoth(d, k, table, codes, 2);
  EXPECT_EQ(scores.faiss[0], -4.0f);
  EXPECT_EQ(scores.faiss[1], scores.scan[1]);
  EXPECT_EQ(scores.scan[1], -1e30f - 3.0f);
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
