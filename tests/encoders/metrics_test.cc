#include "encoders/eval/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace hedgedb {
namespace encoders {
namespace {

// Six items in two classes of three (R = 2 under leave-one-out). Row q holds
// the similarities of query q; the diagonal is never looked at. Expected
// rankings (ties by index), relevant items marked *:
//   q0 (0): 2* 3  1* 4  5     q3 (1): 4* 5* 0  1  2   (tie 4/5 -> 4 first)
//   q1 (0): 3  4  5  0* 2*    q4 (1): 0  5* 3* 1  2
//   q2 (0): 3  1* 0* 5  4     q5 (1): 0  1  2  3* 4*  (all tied -> by index)
const std::vector<int64_t> kLabels = {0, 0, 0, 1, 1, 1};
const std::vector<float> kSimilarity = {
    9.0f, 0.2f, 0.9f, 0.8f, 0.1f, 0.05f,  //
    0.3f, 9.0f, 0.1f, 0.9f, 0.8f, 0.7f,   //
    0.5f, 0.6f, 9.0f, 0.7f, 0.1f, 0.2f,   //
    0.1f, 0.1f, 0.1f, 9.0f, 0.5f, 0.5f,   //
    0.9f, 0.1f, 0.1f, 0.2f, 9.0f, 0.3f,   //
    0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 9.0f,
};

TEST(RetrievalTest, HandComputedSixItemExample) {
  RetrievalOptions options;
  options.recall_ks = {1, 2, 4};
  options.knn_k = 3;
  RetrievalMetrics m;
  const Status s = EvaluateRetrieval(kSimilarity, kLabels, kLabels, options, &m);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // First relevant rank: q0 0, q1 3, q2 1, q3 0, q4 1, q5 3.
  ASSERT_EQ(m.recall_at_k.size(), 3u);
  EXPECT_DOUBLE_EQ(m.recall_at_k[0], 2.0 / 6);
  EXPECT_DOUBLE_EQ(m.recall_at_k[1], 4.0 / 6);
  EXPECT_DOUBLE_EQ(m.recall_at_k[2], 1.0);
  // Top-2 relevance: q0 10 (AP@R 1/2), q1 00 (0), q2 01 (1/4), q3 11 (1),
  // q4 01 (1/4), q5 00 (0). R-precision: 1/2, 0, 1/2, 1, 1/2, 0.
  EXPECT_DOUBLE_EQ(m.map_at_r, 2.0 / 6);
  EXPECT_DOUBLE_EQ(m.r_precision, 2.5 / 6);
  EXPECT_EQ(m.num_queries_with_relevant, 6);
  // K = 3 majority (>= 2 of 3 same label): q0 yes, q1 no, q2 yes, q3 yes,
  // q4 yes, q5 no.
  EXPECT_EQ(m.knn_correct, (std::vector<uint8_t>{1, 0, 1, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(m.knn_accuracy, 4.0 / 6);
}

// A seventh item whose label no other item has: as pytorch-metric-learning's
// AccuracyCalculator does, the lone query is left out of recall@k and MAP@R
// (it cannot be right at any k), and stays in the KNN accuracy over all
// queries. It also enters the other queries' rankings.
// The six-item example plus a seventh item, the only one of its label (2): a
// query with no relevant item. It is last in every ranking of the six (0,
// ties by index); its own row ranks the six equally (0.5).
struct SixAndALoneQuery {
  std::vector<int64_t> labels;
  std::vector<float> similarity;  // 7 x 7
};
SixAndALoneQuery SixItemsAndALoneQuery() {
  const int n = 7;
  SixAndALoneQuery d{kLabels, std::vector<float>(n * n, 0.0f)};
  d.labels.push_back(2);
  for (int q = 0; q < 6; ++q) {
    for (int g = 0; g < 6; ++g) d.similarity[q * n + g] = kSimilarity[q * 6 + g];
  }
  for (int g = 0; g < 6; ++g) d.similarity[6 * n + g] = 0.5f;
  return d;
}

TEST(RetrievalTest, LoneQueriesAreLeftOutOfRecall) {
  const auto [labels, similarity] = SixItemsAndALoneQuery();
  RetrievalOptions options;
  options.recall_ks = {1, 2, 4};
  options.knn_k = 3;
  RetrievalMetrics m;
  ASSERT_TRUE(EvaluateRetrieval(similarity, labels, labels, options, &m).ok());
  EXPECT_EQ(m.num_queries, 7);
  EXPECT_EQ(m.num_queries_with_relevant, 6);
  // The six-item example's figures, unchanged by the lone query.
  EXPECT_DOUBLE_EQ(m.recall_at_k[0], 2.0 / 6);
  EXPECT_DOUBLE_EQ(m.recall_at_k[1], 4.0 / 6);
  EXPECT_DOUBLE_EQ(m.recall_at_k[2], 1.0);
  EXPECT_DOUBLE_EQ(m.map_at_r, 2.0 / 6);
  // KNN over all 7: the lone query is wrong.
  EXPECT_DOUBLE_EQ(m.knn_accuracy, 4.0 / 7);
}

TEST(RetrievalTest, PluralityVoteBreaksTiesByNearestNeighbour) {
  RetrievalOptions options;
  options.recall_ks = {1};
  options.knn_k = 4;
  options.knn_vote = KnnVote::kPlurality;
  RetrievalMetrics m;
  ASSERT_TRUE(EvaluateRetrieval(kSimilarity, kLabels, kLabels, options, &m).ok());
  // Top-4 labels: q0 0101 (tie -> nearest 0: right), q1 1110 (wrong),
  // q2 1001 (tie -> 1: wrong), q3 1100 (tie -> 1: right), q4 0110 (tie -> 0:
  // wrong), q5 0001 (wrong).
  EXPECT_EQ(m.knn_correct, (std::vector<uint8_t>{1, 0, 0, 1, 0, 0}));
  // The same neighbours under a strict majority (3 of 4): none is right.
  options.knn_vote = KnnVote::kMajority;
  ASSERT_TRUE(EvaluateRetrieval(kSimilarity, kLabels, kLabels, options, &m).ok());
  EXPECT_EQ(m.knn_correct, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0}));
}

TEST(RetrievalTest, RowAndPairwiseFormsAgreeWithTheMatrix) {
  RetrievalOptions options;
  options.recall_ks = {1, 2, 4};
  options.knn_k = 3;
  RetrievalMetrics matrix, rows, pairwise;
  ASSERT_TRUE(EvaluateRetrieval(kSimilarity, kLabels, kLabels, options, &matrix).ok());
  const SimilarityRowFn row_fn = [](int64_t q, float* row) {
    for (int g = 0; g < 6; ++g) row[g] = kSimilarity[q * 6 + g];
  };
  ASSERT_TRUE(EvaluateRetrieval(row_fn, 6, kLabels, kLabels, options, &rows).ok());
  int calls = 0;
  const PairScoreFn score = [&calls](int64_t q, int64_t g) {
    ++calls;
    return kSimilarity[q * 6 + g];
  };
  ASSERT_TRUE(EvaluateRetrievalPairwise(score, kLabels, kLabels, options, &pairwise).ok());
  EXPECT_EQ(calls, 30) << "the diagonal is not scored under leave-one-out";
  for (const RetrievalMetrics* m : {&rows, &pairwise}) {
    EXPECT_EQ(m->recall_at_k, matrix.recall_at_k);
    EXPECT_EQ(m->map_at_r, matrix.map_at_r);
    EXPECT_EQ(m->knn_correct, matrix.knn_correct);
  }
  std::vector<float> computed;
  ComputeSimilarityMatrix(score, 6, 6, &computed);
  EXPECT_EQ(computed, kSimilarity);
}

TEST(RetrievalTest, ThreadsGiveIdenticalResults) {
  // 300 items in 30 classes with pseudo-random similarities.
  const int n = 300;
  std::vector<int64_t> labels(n);
  std::vector<float> similarity(n * n);
  uint64_t state = 12345;
  for (int i = 0; i < n; ++i) labels[i] = i % 30;
  for (float& value : similarity) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    value = static_cast<float>(state >> 40) / static_cast<float>(1 << 24);
  }
  RetrievalOptions options;
  RetrievalMetrics one, three;
  ASSERT_TRUE(EvaluateRetrieval(similarity, labels, labels, options, &one).ok());
  options.num_threads = 3;
  ASSERT_TRUE(EvaluateRetrieval(similarity, labels, labels, options, &three).ok());
  EXPECT_EQ(one.recall_at_k, three.recall_at_k);
  EXPECT_EQ(one.map_at_r, three.map_at_r);
  EXPECT_EQ(one.r_precision, three.r_precision);
  EXPECT_EQ(one.knn_correct, three.knn_correct);
  // Random similarities: recall@1 near chance (9 of 299 share a label).
  EXPECT_LT(one.recall_at_k[0], 0.15);

  similarity[250 * n + 3] = std::nanf("");
  const Status s = EvaluateRetrieval(similarity, labels, labels, options, &three);
  EXPECT_NE(s.message().find("query 250"), std::string::npos) << s.ToString();
}

// The error-versus-reject area of recall@1 by eta, by hand, on the seven
// items above. Recall@1 outcomes (first relevant rank 0): q0 right, q1
// wrong, q2 wrong, q3 right, q4 wrong, q5 wrong, q6 lone (left out even
// though its eta is the lowest). Least uncertain first: q0 (0.1) right, q2
// (0.2) wrong, q3 (0.3) right, q5 (0.4) wrong, q1 (0.5) wrong, q4 (0.6)
// wrong: errors of the m kept 0, 1/2, 1/3, 2/4, 3/5, 4/6, area 2.6 / 6.
// Oracle (the two right ones first): 0, 0, 1/3, 2/4, 3/5, 4/6, area 2.1 / 6.
// No information: the error 4/6 at every cut.
TEST(RetrievalTest, ErrorRejectAreaOfRecallAtOneByHand) {
  const auto [labels, similarity] = SixItemsAndALoneQuery();
  RetrievalOptions options;
  options.recall_ks = {1};
  options.knn_k = 3;
  RetrievalMetrics m;
  ASSERT_TRUE(EvaluateRetrieval(similarity, labels, labels, options, &m).ok());
  EXPECT_EQ(m.top1_correct, (std::vector<int8_t>{1, 0, 0, 1, 0, 0, -1}));
  const std::vector<double> eta = {0.1, 0.5, 0.2, 0.3, 0.6, 0.4, 0.0};
  UncertaintyCalibration c;
  ASSERT_TRUE(ErrorRejectOfRecallAt1(eta, m, &c).ok());
  EXPECT_EQ(c.erc_queries, 6);
  EXPECT_NEAR(c.erc_area, 2.6 / 6, 1e-12);
  EXPECT_NEAR(c.erc_area_oracle, 2.1 / 6, 1e-12);
  EXPECT_NEAR(c.erc_area_chance, 4.0 / 6, 1e-12);
  EXPECT_NEAR(c.erc_area_chance, 1 - m.recall_at_k[0], 1e-12);
  // Eta the wrong way round (most uncertain first) is worse than none.
  std::vector<double> reversed;
  for (const double e : eta) reversed.push_back(1 - e);
  ASSERT_TRUE(ErrorRejectOfRecallAt1(reversed, m, &c).ok());
  EXPECT_GT(c.erc_area, 4.0 / 6);
  // One eta per query, none NaN.
  EXPECT_TRUE(ErrorRejectOfRecallAt1({0.1, 0.2}, m, &c).IsInvalidArgument());
  std::vector<double> with_nan = eta;
  with_nan[2] = std::nan("");
  EXPECT_TRUE(ErrorRejectOfRecallAt1(with_nan, m, &c).IsInvalidArgument());
}

TEST(RetrievalTest, SeparateGalleryWithoutLeaveOneOut) {
  // Two probes against a three-item gallery (e.g. clean probes, corrupt
  // gallery of other items): nothing is removed.
  const std::vector<int64_t> query_labels = {7, 8};
  const std::vector<int64_t> gallery_labels = {8, 7, 7};
  const std::vector<float> similarity = {0.9f, 0.5f, 0.1f,  //
                                         0.2f, 0.3f, 0.4f};
  RetrievalOptions options;
  options.recall_ks = {1, 2};
  options.knn_k = 3;
  options.exclude_same_index = false;
  RetrievalMetrics m;
  ASSERT_TRUE(EvaluateRetrieval(similarity, query_labels, gallery_labels, options, &m).ok());
  // q0 (7): 0(8) 1(7)* 2(7)*: recall@1 miss, @2 hit; R = 2: AP@R = 1/4.
  // q1 (8): 2 1 0*: miss at 1 and 2; R = 1: AP@R = 0.
  EXPECT_DOUBLE_EQ(m.recall_at_k[0], 0.0);
  EXPECT_DOUBLE_EQ(m.recall_at_k[1], 0.5);
  EXPECT_DOUBLE_EQ(m.map_at_r, 0.125);
  EXPECT_DOUBLE_EQ(m.r_precision, 0.25);
  // KNN over all 3: q0 has 2 of 3 -> majority; q1 has 1 of 3 -> no.
  EXPECT_EQ(m.knn_correct, (std::vector<uint8_t>{1, 0}));
}

TEST(RetrievalTest, RejectsBadInput) {
  RetrievalOptions options;  // recall@8 needs 8 ranked items
  RetrievalMetrics m;
  Status s = EvaluateRetrieval(kSimilarity, kLabels, kLabels, options, &m);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("only 5 gallery items"), std::string::npos) << s.message();

  options.recall_ks = {1};
  options.knn_k = 3;
  std::vector<float> with_nan = kSimilarity;
  with_nan[2 * 6 + 4] = std::nanf("");
  s = EvaluateRetrieval(with_nan, kLabels, kLabels, options, &m);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("query 2 to gallery item 4 is NaN"), std::string::npos) << s.message();

  // The diagonal removed by leave-one-out is never read.
  std::vector<float> nan_diagonal = kSimilarity;
  for (int i = 0; i < 6; ++i) nan_diagonal[i * 6 + i] = std::nanf("");
  EXPECT_TRUE(EvaluateRetrieval(nan_diagonal, kLabels, kLabels, options, &m).ok());

  std::vector<float> short_matrix(kSimilarity.begin(), kSimilarity.end() - 1);
  EXPECT_TRUE(EvaluateRetrieval(short_matrix, kLabels, kLabels, options, &m).IsInvalidArgument());
  const std::vector<int64_t> small_gallery = {0, 1};
  EXPECT_TRUE(EvaluateRetrieval(std::vector<float>(12, 0.0f), kLabels, small_gallery, options, &m)
                  .IsInvalidArgument());
}

TEST(AveragePrecisionTest, HandComputedValues) {
  double ap = 0;
  // Positives at ranks 1 and 3: (1/1 + 2/3) / 2.
  ASSERT_TRUE(AveragePrecision({0.9, 0.8, 0.7, 0.6}, {1, 0, 1, 0}, &ap).ok());
  EXPECT_NEAR(ap, (1.0 + 2.0 / 3) / 2, 1e-12);
  // Input order does not matter.
  ASSERT_TRUE(AveragePrecision({0.6, 0.7, 0.8, 0.9}, {0, 1, 0, 1}, &ap).ok());
  EXPECT_NEAR(ap, (1.0 + 2.0 / 3) / 2, 1e-12);
  // A tie enters as one threshold: recall 1, precision 1/2.
  ASSERT_TRUE(AveragePrecision({0.5, 0.5}, {1, 0}, &ap).ok());
  EXPECT_NEAR(ap, 0.5, 1e-12);
  ASSERT_TRUE(AveragePrecision({0.5, 0.5}, {0, 1}, &ap).ok());
  EXPECT_NEAR(ap, 0.5, 1e-12);
  // Thresholds 0.9 (R 0), 0.5 (R 1/2, P 1/3), 0.1 (R 1, P 1/2): 1/6 + 1/4.
  ASSERT_TRUE(AveragePrecision({0.9, 0.5, 0.5, 0.1}, {0, 1, 0, 1}, &ap).ok());
  EXPECT_NEAR(ap, 1.0 / 6 + 1.0 / 4, 1e-12);
  ASSERT_TRUE(AveragePrecision({0.3, 0.2}, {1, 1}, &ap).ok());
  EXPECT_NEAR(ap, 1.0, 1e-12);

  EXPECT_TRUE(AveragePrecision({0.1, 0.2}, {0, 0}, &ap).IsInvalidArgument());
  EXPECT_TRUE(AveragePrecision({0.1}, {0, 1}, &ap).IsInvalidArgument());
  EXPECT_TRUE(AveragePrecision({}, {}, &ap).IsInvalidArgument());
  EXPECT_TRUE(AveragePrecision({std::nan(""), 0.2}, {1, 0}, &ap).IsInvalidArgument());
}

TEST(KendallTauTest, HandComputedValuesWithTies) {
  EXPECT_DOUBLE_EQ(KendallTauB({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(KendallTauB({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // One pair tied in y: C = 2, D = 0, n0 = 3, n2 = 1: 2 / sqrt(3 * 2).
  EXPECT_NEAR(KendallTauB({1, 2, 3}, {1, 1, 2}), 2.0 / std::sqrt(6.0), 1e-12);
  // One pair tied in x, another in y: C = 4, D = 0, n0 = 6: 4 / sqrt(5 * 5).
  EXPECT_NEAR(KendallTauB({1, 1, 2, 3}, {1, 2, 2, 3}), 0.8, 1e-12);
  // A pair tied in both counts in both tie totals: x = {1,1,2}, y = {5,5,6}:
  // C = 2, n0 = 3, n1 = n2 = 1 -> 2 / 2 = 1.
  EXPECT_NEAR(KendallTauB({1, 1, 2}, {5, 5, 6}), 1.0, 1e-12);
  // C = 3, D = 3 -> 0.
  EXPECT_NEAR(KendallTauB({1, 2, 3, 4}, {2, 4, 1, 3}), 0.0, 1e-12);
  EXPECT_TRUE(std::isnan(KendallTauB({1, 2, 3}, {5, 5, 5})));
  EXPECT_TRUE(std::isnan(KendallTauB({1}, {1})));
}

constexpr EtaBinning kCount = EtaBinning::kEqualCount;
constexpr EtaBinning kWidth = EtaBinning::kEqualWidth;

TEST(CalibrationTest, AccuracyPerEtaBinAndFlippedTau) {
  // Sorted by eta the items are 1 5 | 3 6 | 2 7 | 4 0 (bins of 2); outcomes
  // give bin accuracies 1, 1/2, 1/2, 0.
  const std::vector<double> eta = {0.8, 0.1, 0.5, 0.3, 0.7, 0.2, 0.4, 0.6};
  const std::vector<uint8_t> correct = {0, 1, 0, 1, 0, 1, 0, 1};
  UncertaintyCalibration c;
  ASSERT_TRUE(CalibrateAccuracy(eta, correct, 4, kCount, &c).ok());
  EXPECT_EQ(c.bin_sizes, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(c.bin_performance, (std::vector<double>{1.0, 0.5, 0.5, 0.0}));
  ASSERT_EQ(c.bin_mean_eta.size(), 4u);
  EXPECT_NEAR(c.bin_mean_eta[0], 0.15, 1e-12);
  EXPECT_NEAR(c.bin_mean_eta[3], 0.75, 1e-12);
  // tau_b(bin, accuracy): D = 5, C = 0, one tie in accuracy: -5 / sqrt(6 * 5);
  // flipped, falling accuracy is positive.
  EXPECT_NEAR(c.kendall_tau, 5.0 / std::sqrt(30.0), 1e-12);

  // Accuracy rising with eta is negative.
  const std::vector<uint8_t> reversed = {1, 0, 1, 0, 1, 0, 1, 1};
  ASSERT_TRUE(CalibrateAccuracy(eta, reversed, 4, kCount, &c).ok());
  EXPECT_LT(c.kendall_tau, 0.0);
}

TEST(CalibrationTest, UnequalBinsAndErrors) {
  std::vector<double> eta(10);
  std::vector<uint8_t> correct(10, 1);
  for (int i = 0; i < 10; ++i) eta[i] = i;
  UncertaintyCalibration c;
  ASSERT_TRUE(CalibrateAccuracy(eta, correct, 4, kCount, &c).ok());
  EXPECT_EQ(c.bin_sizes, (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_TRUE(std::isnan(c.kendall_tau)) << "constant accuracy has no rank correlation";
  EXPECT_TRUE(CalibrateAccuracy(eta, correct, 11, kCount, &c).IsInvalidArgument());
  EXPECT_TRUE(CalibrateAccuracy(eta, correct, 1, kCount, &c).IsInvalidArgument());
  EXPECT_TRUE(
      CalibrateAccuracy(eta, std::vector<uint8_t>(9, 1), 4, kCount, &c).IsInvalidArgument());
  eta[3] = std::nan("");
  EXPECT_TRUE(CalibrateAccuracy(eta, correct, 4, kCount, &c).IsInvalidArgument());
  // An infinite eta: no range for equal widths, and refused for both.
  eta[3] = std::numeric_limits<double>::infinity();
  for (const EtaBinning binning : {kCount, kWidth}) {
    const Status s = CalibrateAccuracy(eta, correct, 4, binning, &c);
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find("eta of item 3 is infinite"), std::string::npos) << s.message();
  }
}

TEST(CalibrationTest, EqualWidthBinsFollowEtaNotCounts) {
  // eta in [0, 1], 4 bins of width 0.25: [0, .25) holds 0, .05, .1, .2, .24;
  // [.25, .5) holds .25 (a left edge belongs to its bin); [.5, .75) none;
  // [.75, 1] holds .8 and the maximum 1.
  const std::vector<double> eta = {0.1, 1.0, 0.05, 0.25, 0.8, 0.0, 0.2, 0.24};
  const std::vector<uint8_t> correct = {1, 0, 1, 0, 1, 1, 0, 1};
  UncertaintyCalibration c;
  ASSERT_TRUE(CalibrateAccuracy(eta, correct, 4, kWidth, &c).ok());
  EXPECT_EQ(c.binning, kWidth);
  EXPECT_EQ(c.bin_sizes, (std::vector<int64_t>{5, 1, 0, 2}));
  ASSERT_EQ(c.bin_performance.size(), 4u);
  EXPECT_DOUBLE_EQ(c.bin_performance[0], 0.8);  // items 0 2 5 6 7: 4 of 5
  EXPECT_DOUBLE_EQ(c.bin_performance[1], 0.0);
  EXPECT_TRUE(std::isnan(c.bin_performance[2])) << "an empty bin has no accuracy";
  EXPECT_DOUBLE_EQ(c.bin_performance[3], 0.5);
  EXPECT_NEAR(c.bin_mean_eta[0], 0.59 / 5, 1e-12);
  EXPECT_TRUE(std::isnan(c.bin_mean_eta[2]));
  EXPECT_NEAR(c.bin_mean_eta[3], 0.9, 1e-12);
  // tau_b over bins 0, 1, 3 (accuracy .8, 0, .5): C = 1, D = 2, no ties:
  // -1/3, flipped to 1/3. The equal-count bins of the same items (2 each:
  // accuracies 1, 1/2, 1/2, 1/2) give tau_b = 3 / sqrt(6 * 3), flipped.
  EXPECT_NEAR(c.kendall_tau, 1.0 / 3.0, 1e-12);
  ASSERT_TRUE(CalibrateAccuracy(eta, correct, 4, kCount, &c).ok());
  EXPECT_EQ(c.binning, kCount);
  EXPECT_NEAR(c.kendall_tau, 3.0 / std::sqrt(18.0), 1e-12);

  // Every eta equal: one full bin, tau undefined.
  ASSERT_TRUE(CalibrateAccuracy(std::vector<double>(8, 0.3), correct, 4, kWidth, &c).ok());
  EXPECT_EQ(c.bin_sizes, (std::vector<int64_t>{8, 0, 0, 0}));
  EXPECT_TRUE(std::isnan(c.kendall_tau));

  // Pairs: AP per equal-width bin of the pair eta.
  const std::vector<double> pair_eta = {0.0, 0.1, 0.2, 0.9, 1.0};
  const std::vector<double> scores = {0.9, 0.1, 0.5, 0.2, 0.8};
  const std::vector<uint8_t> matches = {1, 0, 1, 1, 0};
  ASSERT_TRUE(CalibrateAveragePrecision(pair_eta, scores, matches, 2, kWidth, &c).ok());
  EXPECT_EQ(c.bin_sizes, (std::vector<int64_t>{3, 2}));
  EXPECT_DOUBLE_EQ(c.bin_performance[0], 1.0);  // the matches rank first, second
  EXPECT_DOUBLE_EQ(c.bin_performance[1], 0.5);  // the match ranks second
}

TEST(CalibrationTest, AveragePrecisionPerBinSkipsBinsWithoutMatches) {
  // Three bins of two pairs (sorted by eta as given).
  const std::vector<double> eta = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  const std::vector<double> scores = {0.9, 0.1, 0.2, 0.8, 0.7, 0.6};
  const std::vector<uint8_t> matches = {1, 0, 1, 0, 0, 0};
  UncertaintyCalibration c;
  ASSERT_TRUE(CalibrateAveragePrecision(eta, scores, matches, 3, kCount, &c).ok());
  ASSERT_EQ(c.bin_performance.size(), 3u);
  EXPECT_DOUBLE_EQ(c.bin_performance[0], 1.0);  // the match ranks first
  EXPECT_DOUBLE_EQ(c.bin_performance[1], 0.5);  // the match ranks second
  EXPECT_TRUE(std::isnan(c.bin_performance[2]));
  // Over the two defined bins AP falls: tau_b = -1, flipped to 1.
  EXPECT_DOUBLE_EQ(c.kendall_tau, 1.0);
}

}  // namespace
}  // namespace encoders
}  // namespace hedgedb
