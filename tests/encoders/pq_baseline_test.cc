// The product-quantization baseline on a case worked by hand.
#include "encoders/eval/pq_baseline.h"

#include <gtest/gtest.h>

#include <vector>

namespace hedgedb::encoders {
namespace {

Embeddings Points(const std::vector<float>& xy) {
  Embeddings e;
  e.kind = Kind::kPoint;
  e.dim = 2;
  e.n = static_cast<int64_t>(xy.size() / 2);
  e.vec = xy;
  return e;
}

// Training points on the corners of [0, 10]^2, so with M = 2 sub-codes of
// B = 1 bit each sub-codebook is {0, 10}: a coordinate codes as 0 below 5,
// as 10 above.
Embeddings Corners() {
  std::vector<float> xy;
  for (int i = 0; i < 100; ++i) {
    for (float x : {0.0f, 10.0f}) {
      for (float y : {0.0f, 10.0f}) {
        xy.push_back(x);
        xy.push_back(y);
      }
    }
  }
  return Points(xy);
}

// Items (1,1) A, (4,4) B, (6,6) B, (9,9) A. Exact distances: item 1's nearest
// other is item 2 (B, 8 vs 18) and item 2's is item 1 (B): recall@1 0.5.
// Coded, items 0 and 1 become (0,0) and items 2 and 3 (10,10); by ADC every
// probe's nearest is the other item of its own cell, always of the other
// label: recall@1 0. E.g. probe (4,4): (0,0) at 32, (10,10) at 72.
TEST(PqBaselineTest, RanksByAsymmetricDistanceToTheCodes) {
  const Embeddings items = Points({1, 1, 4, 4, 6, 6, 9, 9});
  const std::vector<int64_t> labels = {0, 1, 1, 0};
  PqOptions options;
  ASSERT_TRUE(ParsePqSpec("2x1", &options).ok());
  EXPECT_EQ(options.subquantizers, 2);
  EXPECT_EQ(options.bits, 1);
  RetrievalOptions one;
  one.recall_ks = {1};
  one.knn_k = 1;
  RetrievalMetrics pq;
  const Status s = PqRetrieval(Corners(), items, items, labels, options, &pq, one);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_DOUBLE_EQ(pq.recall_at_k[0], 0.0);

  // The same items uncompressed: the ranking PQ lost.
  RetrievalMetrics exact;
  const SimilarityRowFn l2 = [&](int64_t q, float* row) {
    for (int64_t i = 0; i < items.n; ++i) {
      const float dx = items.vec[2 * q] - items.vec[2 * i],
                  dy = items.vec[2 * q + 1] - items.vec[2 * i + 1];
      row[i] = -(dx * dx + dy * dy);
    }
  };
  ASSERT_TRUE(EvaluateRetrieval(l2, items.n, labels, labels, one, &exact).ok());
  EXPECT_DOUBLE_EQ(exact.recall_at_k[0], 0.5);

  // One sub-code of 2 bits over both dimensions: the four corners are the
  // four centroids, the items code as (0,0), (0,0), (10,10), (10,10) again.
  ASSERT_TRUE(ParsePqSpec("1x2", &options).ok());
  ASSERT_TRUE(PqRetrieval(Corners(), items, items, labels, options, &pq, one).ok());
  EXPECT_DOUBLE_EQ(pq.recall_at_k[0], 0.0);
}

TEST(PqBaselineTest, BadSpecsAndInputsAreRefused) {
  PqOptions options;
  for (const char* bad : {"", "2", "2x", "x8", "0x8", "2x0", "2x17", "2x8x", "2x8 ", "-1x8"}) {
    const Status s = ParsePqSpec(bad, &options);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("MxB"), std::string::npos) << s.ToString();
  }
  const Embeddings items = Points({1, 1, 4, 4, 6, 6, 9, 9});
  const std::vector<int64_t> labels = {0, 1, 1, 0};
  RetrievalMetrics metrics;
  ASSERT_TRUE(ParsePqSpec("3x1", &options).ok());  // 3 does not divide D = 2
  Status s = PqRetrieval(Corners(), items, items, labels, options, &metrics);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("dimension 2"), std::string::npos) << s.ToString();
  ASSERT_TRUE(ParsePqSpec("2x8", &options).ok());  // 256 centroids from 400 points is fine,
  options.max_train = 100;                         // from 100 it is not
  s = PqRetrieval(Corners(), items, items, labels, options, &metrics);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("100 training items for 256 centroids"), std::string::npos)
      << s.ToString();
  Embeddings gaussian = items;
  gaussian.kind = Kind::kGaussian;
  EXPECT_TRUE(
      PqRetrieval(Corners(), gaussian, gaussian, labels, options, &metrics).IsInvalidArgument());
  ASSERT_TRUE(ParsePqSpec("2x1", &options).ok());
  EXPECT_TRUE(
      PqRetrieval(Corners(), items, items, {0, 1, 1}, options, &metrics).IsInvalidArgument());
}

}  // namespace
}  // namespace hedgedb::encoders
