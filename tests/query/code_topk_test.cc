// CodeTopK against the top-k of a full scan with the scalar reference loop:
// same rows, same scores, same order, whether or not the pre-scan runs.
#include "query/code_topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "query/code_scan.h"
#include "query/scalar_reference.h"
#include "tests/kernel_isas.h"
#include "tests/query/test_rows.h"

namespace hedgedb {
namespace query {
namespace {

using testing_rows::Iota;
using testing_rows::RandomCodes;

// Log-softmax rows of random logits, like a DIMCO query.
std::vector<float> LogSoftmaxTable(int d, int k, std::mt19937_64* rng) {
  std::normal_distribution<float> logits(0.0f, 2.0f);
  std::vector<float> table(static_cast<size_t>(d) * k);
  for (int i = 0; i < d; ++i) {
    double norm = 0;
    for (int j = 0; j < k; ++j) norm += std::exp(table[i * k + j] = logits(*rng));
    for (int j = 0; j < k; ++j) table[i * k + j] -= static_cast<float>(std::log(norm));
  }
  return table;
}

std::vector<CodeHit> ReferenceTopK(const std::vector<float>& table, int d, int k,
                                   const std::vector<uint8_t>& codes, size_t stride,
                                   const std::vector<int64_t>& rows, size_t topk) {
  std::vector<std::pair<float, size_t>> scored;
  for (size_t p = 0; p < rows.size(); ++p) {
    scored.push_back({ScalarCodeScore(table.data(), d, k, codes.data() + rows[p] * stride), p});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<CodeHit> hits;
  for (size_t i = 0; i < std::min(topk, scored.size()); ++i) {
    hits.push_back(CodeHit{rows[scored[i].second], scored[i].first});
  }
  return hits;
}

// The in-order kernel makes CodeScanRows bitwise equal to ScalarCodeScore, so
// scores compare exactly.
class CodeTopKTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = ActiveCodeScanKernel();
    ASSERT_TRUE(SetCodeScanKernel(CodeScanKernel::kInterleaved));
  }
  void TearDown() override { SetCodeScanKernel(saved_); }

  // Checks one case; returns the stats.
  CodeTopKStats Check(const std::vector<float>& table, int d, int k,
                      const std::vector<uint8_t>& codes, size_t stride,
                      const std::vector<int64_t>& rows, size_t topk) {
    std::vector<CodeHit> hits;
    CodeTopKStats stats;
    CodeTopK(table.data(), d, k, codes.data(), stride, rows.data(), rows.size(), topk, &hits,
             &stats);
    const std::vector<CodeHit> expected = ReferenceTopK(table, d, k, codes, stride, rows, topk);
    EXPECT_EQ(hits.size(), expected.size()) << "d=" << d << " k=" << k << " topk=" << topk;
    for (size_t i = 0; i < std::min(hits.size(), expected.size()); ++i) {
      EXPECT_EQ(hits[i].row, expected[i].row) << "d=" << d << " k=" << k << " rank " << i;
      EXPECT_EQ(hits[i].score, expected[i].score) << "d=" << d << " k=" << k << " rank " << i;
    }
    return stats;
  }

 private:
  CodeScanKernel saved_ = CodeScanKernel::kBlocked;
};

TEST_F(CodeTopKTest, EqualsFullScanTopK) {
  std::mt19937_64 rng(5);
  for (const auto& dk : std::vector<std::pair<int, int>>{
           {64, 16}, {7, 16}, {64, 2}, {33, 5}, {1, 16}, {60, 16}, {64, 256}, {100, 16}}) {
    const int d = dk.first, k = dk.second;
    const std::vector<float> table = LogSoftmaxTable(d, k, &rng);
    const size_t n = 20001, stride = d + 3;
    const std::vector<uint8_t> codes = RandomCodes(n, d, k, stride, &rng);
    // A shuffled subset of the rows, as after a filter.
    std::vector<int64_t> rows = Iota(n);
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(n - 1000);
    for (size_t topk : {1, 10, 100, 20000}) {
      const CodeTopKStats stats = Check(table, d, k, codes, stride, rows, topk);
      if (topk < rows.size()) {
        EXPECT_EQ(stats.prescan, CodeTopKPrescanAvailable(d, k)) << "d=" << d << " k=" << k;
      }
      if (stats.prescan && topk == 10) {
        EXPECT_LT(stats.rescored, rows.size() / 10) << "d=" << d << " k=" << k;
      }
    }
  }
}

TEST_F(CodeTopKTest, TiesKeepRowOrder) {
  // 40 distinct codes repeated over 5,000 rows: many equal scores at the cut.
  std::mt19937_64 rng(6);
  const int d = 64, k = 16;
  const std::vector<float> table = LogSoftmaxTable(d, k, &rng);
  const size_t n = 5000;
  const std::vector<uint8_t> patterns = RandomCodes(40, d, k, d, &rng);
  std::vector<uint8_t> codes(n * d);
  for (size_t r = 0; r < n; ++r) {
    std::copy_n(patterns.begin() + (r % 40) * d, d, codes.begin() + r * d);
  }
  const std::vector<int64_t> rows = Iota(n);
  for (size_t topk : {1, 10, 200, 333}) Check(table, d, k, codes, d, rows, topk);
}

TEST_F(CodeTopKTest, NonFiniteTableUsesFullScan) {
  std::mt19937_64 rng(7);
  const int d = 64, k = 16;
  std::vector<float> table = LogSoftmaxTable(d, k, &rng);
  table[5 * k + 3] = -std::numeric_limits<float>::infinity();  // log 0
  const size_t n = 3001;
  const std::vector<uint8_t> codes = RandomCodes(n, d, k, d, &rng);
  const CodeTopKStats stats = Check(table, d, k, codes, d, Iota(n), 10);
  EXPECT_FALSE(stats.prescan);
  EXPECT_EQ(stats.rescored, n);
}

// The pre-scan selects as it goes, in chunks of rows (the first ones short)
// against a floor that rises between them. Rows in ascending score order
// raise it in every chunk and put the top-k at the very end; descending order
// settles it in the first chunk. Both, at every level, with topk below, at
// and above the chunk sizes, and odd row counts and dimensions (masked loads
// and the per-row tail).
TEST_F(CodeTopKTest, RisingFloorAcrossChunks) {
  std::mt19937_64 rng(9);
  for (const auto& dk : std::vector<std::pair<int, int>>{{64, 16}, {37, 11}}) {
    const int d = dk.first, k = dk.second;
    const std::vector<float> table = LogSoftmaxTable(d, k, &rng);
    const size_t n = 3 * 4096 + 13, stride = d;
    const std::vector<uint8_t> codes = RandomCodes(n, d, k, stride, &rng);
    std::vector<std::pair<float, int64_t>> by_score;
    for (size_t r = 0; r < n; ++r) {
      by_score.push_back({ScalarCodeScore(table.data(), d, k, codes.data() + r * stride),
                          static_cast<int64_t>(r)});
    }
    std::sort(by_score.begin(), by_score.end());
    std::vector<int64_t> ascending;
    for (const auto& s : by_score) ascending.push_back(s.second);
    std::vector<int64_t> descending(ascending.rbegin(), ascending.rend());
    for (KernelIsa isa : testing_util::SupportedKernelIsas()) {
      const testing_util::ScopedKernelIsa forced(isa);
      ASSERT_TRUE(forced.ok());
      for (const std::vector<int64_t>* rows : {&ascending, &descending}) {
        for (size_t topk : std::vector<size_t>{1, 10, 256, 257, 5000, n - 1}) {
          const CodeTopKStats stats = Check(table, d, k, codes, stride, *rows, topk);
          EXPECT_EQ(stats.prescan, CodeTopKPrescanAvailable(d, k)) << KernelIsaName(isa);
          if (stats.prescan && topk == 10) {
            EXPECT_LT(stats.rescored, n / 10) << "d=" << d << " " << KernelIsaName(isa);
          }
        }
      }
    }
  }
}

// An item whose exact score is higher but whose quantized sum Q is lower
// than the k-th best Q seen before it: the pre-scan must keep it (the margin
// of d steps below the running k-th Q). Steps of 1/64 (the row range is 254
// of them); per dimension symbol 0 is the row minimum (Q 0), symbol 1 is 0.99
// steps above it (Q 0), symbol 2 one step (Q 1), symbol 3 the maximum. B
// (symbol 2 in dimension 0, else 0: Q 1, 1 step above the minimum sum) comes
// first; A (all symbol 1: Q 0, 63.4 steps above) far later, in another
// chunk, among fillers of symbol 0.
TEST_F(CodeTopKTest, KeepsItemsBelowTheRunningKthWithinTheMargin) {
  const int d = 64, k = 16;
  const float step = 1.0f / 64;
  std::vector<float> table(d * k, -10.0f);
  for (int i = 0; i < d; ++i) {
    table[i * k + 1] = -10.0f + 0.99f * step;
    table[i * k + 2] = -10.0f + step;
    table[i * k + 3] = -10.0f + 254 * step;
  }
  const size_t n = 10000, a_row = 9000, b_rows = 5;
  std::vector<uint8_t> codes(n * d, 0);
  for (size_t r = 0; r < b_rows; ++r) codes[r * d] = 2;
  std::fill_n(codes.begin() + a_row * d, d, 1);
  for (KernelIsa isa : testing_util::SupportedKernelIsas()) {
    const testing_util::ScopedKernelIsa forced(isa);
    ASSERT_TRUE(forced.ok());
    for (size_t topk : {1, 3, 5}) {
      const CodeTopKStats stats = Check(table, d, k, codes, d, Iota(n), topk);
      EXPECT_EQ(stats.prescan, CodeTopKPrescanAvailable(d, k)) << KernelIsaName(isa);
    }
  }
  std::vector<CodeHit> hits;
  CodeTopK(table.data(), d, k, codes.data(), d, Iota(n).data(), n, 1, &hits);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].row, static_cast<int64_t>(a_row));
}

// rows null stands for 0..n-1 (the searcher's call when every row is live):
// the same hits as with the ids, at every level, through the pre-scan and
// through the full scan (a -inf entry).
TEST_F(CodeTopKTest, NullRowsAreEveryRowInOrder) {
  std::mt19937_64 rng(10);
  for (const auto& dk : std::vector<std::pair<int, int>>{{64, 16}, {37, 11}, {64, 256}}) {
    const int d = dk.first, k = dk.second;
    for (bool log_zero : {false, true}) {
      std::vector<float> table = LogSoftmaxTable(d, k, &rng);
      if (log_zero) table[3] = -std::numeric_limits<float>::infinity();
      const size_t n = 2 * 4096 + 7, stride = d + 1;
      const std::vector<uint8_t> codes = RandomCodes(n, d, k, stride, &rng);
      for (KernelIsa isa : testing_util::SupportedKernelIsas()) {
        const testing_util::ScopedKernelIsa forced(isa);
        ASSERT_TRUE(forced.ok());
        for (size_t topk : std::vector<size_t>{1, 10, 300, n - 1, n}) {
          std::vector<CodeHit> hits;
          CodeTopKStats stats;
          CodeTopK(table.data(), d, k, codes.data(), stride, nullptr, n, topk, &hits, &stats);
          const std::vector<CodeHit> expected =
              ReferenceTopK(table, d, k, codes, stride, Iota(n), topk);
          ASSERT_EQ(hits.size(), expected.size());
          for (size_t i = 0; i < hits.size(); ++i) {
            EXPECT_EQ(hits[i].row, expected[i].row) << "d=" << d << " rank " << i;
            EXPECT_EQ(hits[i].score, expected[i].score) << "d=" << d << " rank " << i;
          }
          EXPECT_EQ(stats.prescan, !log_zero && topk < n && CodeTopKPrescanAvailable(d, k))
              << KernelIsaName(isa) << " d=" << d;
        }
      }
    }
  }
}

// At every SIMD level the same hits as the reference; the pre-scan (AVX-512
// VBMI) runs only at kAvx512, so SetKernelIsa(kPortable) turns it off.
TEST_F(CodeTopKTest, EveryLevelGivesTheReferenceAndPrescansOnlyAtAvx512) {
  std::mt19937_64 rng(8);
  const int d = 64, k = 16;
  const std::vector<float> table = LogSoftmaxTable(d, k, &rng);
  const size_t n = 4001;
  const std::vector<uint8_t> codes = RandomCodes(n, d, k, d, &rng);
  for (KernelIsa isa : testing_util::SupportedKernelIsas()) {
    const testing_util::ScopedKernelIsa forced(isa);
    ASSERT_TRUE(forced.ok());
    const CodeTopKStats stats = Check(table, d, k, codes, d, Iota(n), 10);
    EXPECT_EQ(stats.prescan, CodeTopKPrescanAvailable(d, k)) << KernelIsaName(isa);
    if (isa != KernelIsa::kAvx512) {
      EXPECT_FALSE(stats.prescan) << KernelIsaName(isa);
      EXPECT_EQ(stats.rescored, n) << KernelIsaName(isa);
    }
  }
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
