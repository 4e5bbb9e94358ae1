// Evaluation metrics of the papers' protocols (recall@k, MAP@R, KNN accuracy,
// verification AP, uncertainty calibration), torch-free.
//
// Everything works on similarities where higher = more similar, so point
// embeddings (negated distance), Gaussian Monte Carlo match probabilities, MLS
// and DIMCO log-probability scores all reuse the same code. Similarities come
// as a dense row-major matrix (queries x gallery), a row callback or a
// pairwise score function.
//
// Ranking rule shared by all retrieval metrics: gallery items in descending
// similarity, ties broken by ascending gallery index (deterministic). NaN
// similarities are rejected with an error naming the query and gallery index
// (except on the diagonal removed by leave-one-out, which is never read).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace encoders {

// Fills `row` (num_gallery values) with the similarities of query `query` to
// every gallery item.
using SimilarityRowFn = std::function<void(int64_t query, float* row)>;
// Similarity of one query to one gallery item.
using PairScoreFn = std::function<float(int64_t query, int64_t gallery)>;

enum class KnnVote {
  // HIB section 4.3: correct "only if a majority of the neighbors have the
  // correct class", i.e. more than K/2 of the K nearest share the query's label.
  kMajority,
  // HIB appendix G: the predicted class is the plurality class of the K
  // nearest; ties between classes go to the class of the nearest neighbour
  // among the tied classes.
  kPlurality,
};

struct RetrievalOptions {
  std::vector<int> recall_ks = {1, 2, 4, 8};
  int knn_k = 5;
  KnnVote knn_vote = KnnVote::kMajority;
  // Leave-one-out: gallery item q is removed from query q's ranking. Use it
  // when queries and gallery are the same items (or twins with the same
  // indices, e.g. clean probes against a corrupt gallery); requires
  // num_gallery >= num_queries.
  bool exclude_same_index = true;
  // Queries are split into this many contiguous blocks evaluated in parallel
  // (the row / pair function must then be thread-safe). Results are identical
  // for any thread count.
  int num_threads = 1;
};

struct RetrievalMetrics {
  std::vector<int> recall_ks;
  // Fraction of queries with a same-label item among the top k, over the
  // queries that have at least one same-label gallery item (R >= 1; a query
  // without one is left out, as pytorch-metric-learning leaves out "lone"
  // queries; 0 when no query has one).
  std::vector<double> recall_at_k;
  // MAP@R and R-precision with R = number of same-label gallery items (class
  // size - 1 under leave-one-out), averaged over the queries with R >= 1.
  double map_at_r = 0.0;
  double r_precision = 0.0;
  int64_t num_queries_with_relevant = 0;
  // KNN accuracy over all queries, and the per-query outcome (1 = correct),
  // the input of the uncertainty calibration.
  double knn_accuracy = 0.0;
  std::vector<uint8_t> knn_correct;
  // Per query, whether its nearest gallery item shares its label (recall@1's
  // outcome): 1 or 0, and -1 for a lone query (left out of recall@k).
  std::vector<int8_t> top1_correct;
  int64_t num_queries = 0;
};

// Computes recall@k, MAP@R, R-precision and KNN accuracy in one pass over the
// rows (so an expensive similarity is evaluated once per query/gallery pair).
// Errors: label counts not matching, k < 1 or k larger than the ranked gallery,
// exclude_same_index with fewer gallery than query items, NaN similarities.
Status EvaluateRetrieval(const SimilarityRowFn& rows, int64_t num_queries,
                         const std::vector<int64_t>& query_labels,
                         const std::vector<int64_t>& gallery_labels,
                         const RetrievalOptions& options, RetrievalMetrics* metrics);
// Matrix form: `similarity` is num_queries x gallery_labels.size(), row-major.
Status EvaluateRetrieval(const std::vector<float>& similarity,
                         const std::vector<int64_t>& query_labels,
                         const std::vector<int64_t>& gallery_labels,
                         const RetrievalOptions& options, RetrievalMetrics* metrics);
// Pairwise form: calls score(q, g) for every query/gallery pair.
Status EvaluateRetrievalPairwise(const PairScoreFn& score, const std::vector<int64_t>& query_labels,
                                 const std::vector<int64_t>& gallery_labels,
                                 const RetrievalOptions& options, RetrievalMetrics* metrics);

// Recall@k from each query's rank of its nearest same-label result (0-based;
// any value >= k, e.g. the number of results, when none was found):
// recall_at_k[i] = fraction of queries with first_hit < ks[i]. The one
// recall computation: EvaluateRetrieval and the image queries use it.
std::vector<double> RecallAtK(const std::vector<int64_t>& first_hit, const std::vector<int>& ks);

// Dense similarity matrix (num_queries x num_gallery) from a pair function.
void ComputeSimilarityMatrix(const PairScoreFn& score, int64_t num_queries, int64_t num_gallery,
                             std::vector<float>* similarity);

// Average precision of a ranking by `scores` (higher = predicted match) against
// `matches`: AP = sum over distinct score thresholds t of (recall(t) -
// recall(previous t)) * precision(t), items with equal scores entering together
// (scikit-learn's average_precision_score; invariant to the order of ties).
// Errors: size mismatch, empty input, no positive pair, NaN scores.
Status AveragePrecision(const std::vector<double>& scores, const std::vector<uint8_t>& matches,
                        double* average_precision);

// Kendall's tau-b of (x, y): (concordant - discordant) /
// sqrt((n0 - n1) * (n0 - n2)), n0 = n(n-1)/2, n1 = pairs tied in x, n2 = pairs
// tied in y (a pair tied in both counts in both; a tied pair is neither
// concordant nor discordant). NaN when either variable is constant or n < 2.
// O(n^2): meant for bins, not data sets.
double KendallTauB(const std::vector<double>& x, const std::vector<double>& y);

// How items are cut into eta bins. HIB section 4.4 bins verification pairs
// into "20 equal-sized bins"; of KNN it says "we sort all test input
// examples according to eta(x), and bin examples into 20 bins ranging from
// the lowest to highest range of uncertainty". The sort points to equal
// counts; bins of equal eta width are the less likely reading, measured as
// well because the two give very different taus: eta is skewed (most items
// near the lowest eta), so equal-width bins put nearly every item in the
// first bin and leave the others small or empty.
enum class EtaBinning {
  kEqualCount,  // items sorted by ascending eta (ties by index), num_bins
                // equal-sized bins (the first n % bins bins get one extra item)
  kEqualWidth,  // bin b holds min + [b, b + 1) * (max - min) / num_bins (the
                // last bin closed); may leave bins empty; all in bin 0 if
                // every eta is equal
};
const char* EtaBinningName(EtaBinning binning);  // "equal_count", "equal_width"

// Uncertainty calibration (HIB section 4.4): items are cut into num_bins eta
// bins (EtaBinning); a performance value is computed per bin, and tau =
// -KendallTauB(bin index, performance): positive when performance falls as
// uncertainty rises. Bins whose performance is undefined (an empty bin, AP of
// a bin without a matching pair) are NaN and left out of tau; an empty bin's
// mean eta is NaN.
struct UncertaintyCalibration {
  EtaBinning binning = EtaBinning::kEqualCount;
  std::vector<int64_t> bin_sizes;
  std::vector<double> bin_mean_eta;
  std::vector<double> bin_performance;
  double kendall_tau = 0.0;  // sign flipped; NaN if undefined
  // The error-versus-reject areas of recall@1 with confidence -eta
  // (ErrorRejectOfRecallAt1; NaN when not measured): eta's, the oracle's and
  // that of a confidence that says nothing (1 - recall@1), over erc_queries.
  double erc_area = std::numeric_limits<double>::quiet_NaN();
  double erc_area_oracle = std::numeric_limits<double>::quiet_NaN();
  double erc_area_chance = std::numeric_limits<double>::quiet_NaN();
  int64_t erc_queries = 0;
};

// KNN (or any per-item 0/1 outcome): accuracy per eta bin.
// Errors: size mismatch, num_bins < 2, fewer items than bins, an eta that is
// NaN or infinite.
Status CalibrateAccuracy(const std::vector<double>& eta, const std::vector<uint8_t>& correct,
                         int num_bins, EtaBinning binning, UncertaintyCalibration* calibration);
// The area under the error-versus-reject curve of recall@1 ("Probabilistic
// Embeddings Revisited", section 5), the queries ranked by -eta (least
// uncertain first), computed by the calibration report's ErrorRejectArea
// (hedgedb/error_reject.h). Lone queries are left out, as recall@k leaves
// them out. Errors: eta not one per query of `metrics`, a NaN eta.
Status ErrorRejectOfRecallAt1(const std::vector<double>& eta, const RetrievalMetrics& metrics,
                              UncertaintyCalibration* calibration);

// Verification: pairs binned by their eta (HIB: the mean of the two items'
// eta), average precision of the pair scores per bin.
Status CalibrateAveragePrecision(const std::vector<double>& pair_eta,
                                 const std::vector<double>& scores,
                                 const std::vector<uint8_t>& matches, int num_bins,
                                 EtaBinning binning, UncertaintyCalibration* calibration);

}  // namespace encoders
}  // namespace hedgedb
