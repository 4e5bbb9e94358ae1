#include "encoders/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <thread>

#include "hedgedb/error_reject.h"

namespace hedgedb {
namespace encoders {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Number of gallery items per label, for R in MAP@R.
class LabelCounts {
 public:
  explicit LabelCounts(const std::vector<int64_t>& labels) : sorted_(labels) {
    std::sort(sorted_.begin(), sorted_.end());
  }
  int64_t Count(int64_t label) const {
    const auto range = std::equal_range(sorted_.begin(), sorted_.end(), label);
    return range.second - range.first;
  }

 private:
  std::vector<int64_t> sorted_;
};

bool KnnCorrect(const std::vector<int64_t>& neighbour_labels, int64_t query_label, KnnVote vote) {
  const int64_t k = static_cast<int64_t>(neighbour_labels.size());
  if (vote == KnnVote::kMajority) {
    const int64_t hits = std::count(neighbour_labels.begin(), neighbour_labels.end(), query_label);
    return 2 * hits > k;
  }
  // Plurality: scanning neighbours nearest first and keeping the first label
  // that reaches the best count breaks ties towards the nearest neighbour.
  int64_t best_label = neighbour_labels[0];
  int64_t best_count = 0;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t count =
        std::count(neighbour_labels.begin(), neighbour_labels.end(), neighbour_labels[i]);
    if (count > best_count) {
      best_count = count;
      best_label = neighbour_labels[i];
    }
  }
  return best_label == query_label;
}

}  // namespace

std::vector<double> RecallAtK(const std::vector<int64_t>& first_hit, const std::vector<int>& ks) {
  std::vector<double> recall(ks.size(), 0.0);
  if (first_hit.empty()) return recall;
  for (const int64_t first : first_hit) {
    for (size_t i = 0; i < ks.size(); ++i) {
      if (first < ks[i]) recall[i] += 1.0;
    }
  }
  for (double& r : recall) r /= static_cast<double>(first_hit.size());
  return recall;
}

Status EvaluateRetrieval(const SimilarityRowFn& rows, int64_t num_queries,
                         const std::vector<int64_t>& query_labels,
                         const std::vector<int64_t>& gallery_labels,
                         const RetrievalOptions& options, RetrievalMetrics* metrics) {
  const int64_t num_gallery = static_cast<int64_t>(gallery_labels.size());
  if (num_queries < 1 || static_cast<int64_t>(query_labels.size()) != num_queries) {
    return Status::InvalidArgument("retrieval: " + std::to_string(num_queries) + " queries but " +
                                   std::to_string(query_labels.size()) + " query labels");
  }
  if (options.exclude_same_index && num_gallery < num_queries) {
    return Status::InvalidArgument("retrieval: leave-one-out needs a gallery item per query, got " +
                                   std::to_string(num_gallery) + " gallery items for " +
                                   std::to_string(num_queries) + " queries");
  }
  const int64_t ranked = num_gallery - (options.exclude_same_index ? 1 : 0);
  int64_t max_k = options.knn_k;
  for (const int k : options.recall_ks) max_k = std::max<int64_t>(max_k, k);
  for (const int k : options.recall_ks) {
    if (k < 1) return Status::InvalidArgument("retrieval: recall@" + std::to_string(k));
  }
  if (options.knn_k < 1 || max_k > ranked) {
    return Status::InvalidArgument("retrieval: k up to " + std::to_string(max_k) + " (KNN k " +
                                   std::to_string(options.knn_k) + ") but only " +
                                   std::to_string(ranked) + " gallery items are ranked per query");
  }

  const LabelCounts counts(gallery_labels);
  // Per-query outcomes, summed in query order afterwards so that the result
  // does not depend on the number of threads.
  std::vector<int64_t> first_hit(num_queries, 0);
  std::vector<int64_t> relevant(num_queries, 0);
  std::vector<double> average_precision_at_r(num_queries, 0.0);
  std::vector<double> r_precision(num_queries, 0.0);
  std::vector<uint8_t> knn_correct(num_queries, 0);
  std::vector<int8_t> top1_correct(num_queries, -1);

  // Evaluates queries [begin, end); returns the first error.
  const auto evaluate_range = [&](int64_t begin, int64_t end) -> Status {
    std::vector<float> row(num_gallery);
    std::vector<int64_t> order;
    order.reserve(num_gallery);
    std::vector<int64_t> neighbour_labels(options.knn_k);
    for (int64_t q = begin; q < end; ++q) {
      rows(q, row.data());
      order.clear();
      for (int64_t g = 0; g < num_gallery; ++g) {
        // The removed diagonal may hold anything (a self-score is often undefined).
        if (options.exclude_same_index && g == q) continue;
        if (std::isnan(row[g])) {
          return Status::InvalidArgument("retrieval: similarity of query " + std::to_string(q) +
                                         " to gallery item " + std::to_string(g) + " is NaN");
        }
        order.push_back(g);
      }
      const int64_t label = query_labels[q];
      int64_t r = counts.Count(label);
      if (options.exclude_same_index && gallery_labels[q] == label) --r;
      const int64_t depth = std::min<int64_t>(ranked, std::max(max_k, r));
      std::partial_sort(
          order.begin(), order.begin() + depth, order.end(),
          [&row](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });

      int64_t first = depth;  // rank of the nearest same-label item
      int64_t hits = 0;
      double precision_sum = 0.0;
      for (int64_t rank = 0; rank < depth; ++rank) {
        if (gallery_labels[order[rank]] != label) continue;
        first = std::min(first, rank);
        if (rank < r) {
          ++hits;
          precision_sum += static_cast<double>(hits) / static_cast<double>(rank + 1);
        }
      }
      first_hit[q] = first;
      relevant[q] = r;
      if (r > 0) {
        top1_correct[q] = first == 0 ? 1 : 0;
        average_precision_at_r[q] = precision_sum / static_cast<double>(r);
        r_precision[q] = static_cast<double>(hits) / static_cast<double>(r);
      }
      for (int i = 0; i < options.knn_k; ++i) neighbour_labels[i] = gallery_labels[order[i]];
      knn_correct[q] = KnnCorrect(neighbour_labels, label, options.knn_vote) ? 1 : 0;
    }
    return Status::OK();
  };

  const int64_t num_threads =
      std::max<int64_t>(1, std::min<int64_t>(options.num_threads, num_queries));
  if (num_threads == 1) {
    HEDGEDB_RETURN_IF_ERROR(evaluate_range(0, num_queries));
  } else {
    // Contiguous query blocks; the error of the lowest block wins, as it would
    // single-threaded.
    std::vector<Status> statuses(num_threads);
    std::vector<std::thread> threads;
    for (int64_t t = 0; t < num_threads; ++t) {
      const int64_t begin = num_queries * t / num_threads;
      const int64_t end = num_queries * (t + 1) / num_threads;
      threads.emplace_back([&, t, begin, end] { statuses[t] = evaluate_range(begin, end); });
    }
    for (std::thread& thread : threads) thread.join();
    for (const Status& status : statuses) HEDGEDB_RETURN_IF_ERROR(status);
  }

  RetrievalMetrics out;
  out.recall_ks = options.recall_ks;
  // pytorch-metric-learning's convention: a query with no other same-label
  // item in the gallery (a "lone" query) cannot be right at any k and is left
  // out of recall@k, as it is of MAP@R.
  std::vector<int64_t> first_hit_with_relevant;
  for (int64_t q = 0; q < num_queries; ++q) {
    if (relevant[q] > 0) first_hit_with_relevant.push_back(first_hit[q]);
  }
  out.recall_at_k = RecallAtK(first_hit_with_relevant, options.recall_ks);
  out.num_queries = num_queries;
  double map_sum = 0.0;
  double r_precision_sum = 0.0;
  int64_t knn_hits = 0;
  for (int64_t q = 0; q < num_queries; ++q) {
    if (relevant[q] > 0) {
      ++out.num_queries_with_relevant;
      map_sum += average_precision_at_r[q];
      r_precision_sum += r_precision[q];
    }
    knn_hits += knn_correct[q];
  }
  if (out.num_queries_with_relevant > 0) {
    out.map_at_r = map_sum / static_cast<double>(out.num_queries_with_relevant);
    out.r_precision = r_precision_sum / static_cast<double>(out.num_queries_with_relevant);
  }
  out.knn_accuracy = static_cast<double>(knn_hits) / static_cast<double>(num_queries);
  out.knn_correct = std::move(knn_correct);
  out.top1_correct = std::move(top1_correct);
  *metrics = std::move(out);
  return Status::OK();
}

Status EvaluateRetrieval(const std::vector<float>& similarity,
                         const std::vector<int64_t>& query_labels,
                         const std::vector<int64_t>& gallery_labels,
                         const RetrievalOptions& options, RetrievalMetrics* metrics) {
  const size_t num_gallery = gallery_labels.size();
  if (similarity.size() != query_labels.size() * num_gallery) {
    return Status::InvalidArgument("retrieval: similarity matrix has " +
                                   std::to_string(similarity.size()) + " values, expected " +
                                   std::to_string(query_labels.size()) + " queries x " +
                                   std::to_string(num_gallery) + " gallery items");
  }
  const SimilarityRowFn rows = [&](int64_t q, float* row) {
    std::copy_n(similarity.data() + q * num_gallery, num_gallery, row);
  };
  return EvaluateRetrieval(rows, static_cast<int64_t>(query_labels.size()), query_labels,
                           gallery_labels, options, metrics);
}

Status EvaluateRetrievalPairwise(const PairScoreFn& score, const std::vector<int64_t>& query_labels,
                                 const std::vector<int64_t>& gallery_labels,
                                 const RetrievalOptions& options, RetrievalMetrics* metrics) {
  const int64_t num_gallery = static_cast<int64_t>(gallery_labels.size());
  const SimilarityRowFn rows = [&](int64_t q, float* row) {
    for (int64_t g = 0; g < num_gallery; ++g) {
      // Leave-one-out never looks at the diagonal; skipping it saves a
      // (possibly Monte Carlo) score evaluation per query.
      row[g] = options.exclude_same_index && g == q ? 0.0f : score(q, g);
    }
  };
  return EvaluateRetrieval(rows, static_cast<int64_t>(query_labels.size()), query_labels,
                           gallery_labels, options, metrics);
}

void ComputeSimilarityMatrix(const PairScoreFn& score, int64_t num_queries, int64_t num_gallery,
                             std::vector<float>* similarity) {
  similarity->resize(static_cast<size_t>(num_queries * num_gallery));
  for (int64_t q = 0; q < num_queries; ++q) {
    for (int64_t g = 0; g < num_gallery; ++g) (*similarity)[q * num_gallery + g] = score(q, g);
  }
}

// ---------------------------------------------------------------------------

Status AveragePrecision(const std::vector<double>& scores, const std::vector<uint8_t>& matches,
                        double* average_precision) {
  if (scores.empty() || scores.size() != matches.size()) {
    return Status::InvalidArgument("average precision: " + std::to_string(scores.size()) +
                                   " scores for " + std::to_string(matches.size()) + " labels");
  }
  int64_t positives = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) {
      return Status::InvalidArgument("average precision: score " + std::to_string(i) + " is NaN");
    }
    if (matches[i] != 0) ++positives;
  }
  if (positives == 0) {
    return Status::InvalidArgument("average precision: no matching pair among " +
                                   std::to_string(scores.size()));
  }
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&scores](size_t a, size_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  double ap = 0.0;
  int64_t true_positives = 0;
  int64_t seen = 0;
  double previous_recall = 0.0;
  for (size_t i = 0; i < order.size();) {
    // One threshold per distinct score: the whole tie group enters at once.
    size_t end = i;
    while (end < order.size() && scores[order[end]] == scores[order[i]]) {
      if (matches[order[end]] != 0) ++true_positives;
      ++seen;
      ++end;
    }
    const double recall = static_cast<double>(true_positives) / static_cast<double>(positives);
    const double precision = static_cast<double>(true_positives) / static_cast<double>(seen);
    ap += (recall - previous_recall) * precision;
    previous_recall = recall;
    i = end;
  }
  *average_precision = ap;
  return Status::OK();
}

double KendallTauB(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return kNaN;
  int64_t concordant = 0;
  int64_t discordant = 0;
  int64_t tied_x = 0;
  int64_t tied_y = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const double dx = x[i] - x[j];
      const double dy = y[i] - y[j];
      if (dx == 0) ++tied_x;
      if (dy == 0) ++tied_y;
      if (dx == 0 || dy == 0) continue;
      if ((dx > 0) == (dy > 0)) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  }
  const double pairs = static_cast<double>(n) * static_cast<double>(n - 1) / 2.0;
  const double denominator = std::sqrt((pairs - tied_x) * (pairs - tied_y));
  if (denominator == 0.0) return kNaN;
  return static_cast<double>(concordant - discordant) / denominator;
}

namespace {

// Item indices cut into eta bins (EtaBinning).
Status BinByEta(const std::vector<double>& eta, int num_bins, EtaBinning binning,
                std::vector<std::vector<size_t>>* bins) {
  if (num_bins < 2 || eta.size() < static_cast<size_t>(num_bins)) {
    return Status::InvalidArgument("uncertainty calibration: " + std::to_string(eta.size()) +
                                   " items cannot fill " + std::to_string(num_bins) +
                                   " bins (need >= 2 bins and an item per bin)");
  }
  for (size_t i = 0; i < eta.size(); ++i) {
    if (!std::isfinite(eta[i])) {
      // An infinite eta would also leave equal-width bins no range to cut.
      return Status::InvalidArgument("uncertainty calibration: eta of item " + std::to_string(i) +
                                     " is " + (std::isnan(eta[i]) ? "NaN" : "infinite"));
    }
  }
  bins->assign(num_bins, {});
  if (binning == EtaBinning::kEqualWidth) {
    const auto [lo, hi] = std::minmax_element(eta.begin(), eta.end());
    const double range = *hi - *lo;
    for (size_t i = 0; i < eta.size(); ++i) {
      // (eta - min) / range * bins, in double: the maximum lands on num_bins
      // exactly and is moved into the last bin; a value on an inner edge may
      // round into the bin below it.
      const double position = range > 0 ? (eta[i] - *lo) / range * num_bins : 0.0;
      const size_t b = std::min(static_cast<size_t>(num_bins - 1), static_cast<size_t>(position));
      (*bins)[b].push_back(i);
    }
    return Status::OK();
  }
  std::vector<size_t> order(eta.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&eta](size_t a, size_t b) { return eta[a] < eta[b] || (eta[a] == eta[b] && a < b); });
  const size_t base = eta.size() / num_bins;
  const size_t extra = eta.size() % num_bins;
  size_t next = 0;
  for (size_t b = 0; b < static_cast<size_t>(num_bins); ++b) {
    const size_t size = base + (b < extra ? 1 : 0);
    (*bins)[b].assign(order.begin() + next, order.begin() + next + size);
    next += size;
  }
  return Status::OK();
}

// Fills sizes and mean eta, and tau over the bins with defined performance.
void FinishCalibration(const std::vector<double>& eta, const std::vector<std::vector<size_t>>& bins,
                       UncertaintyCalibration* calibration) {
  calibration->bin_sizes.clear();
  calibration->bin_mean_eta.clear();
  std::vector<double> index;
  std::vector<double> performance;
  for (size_t b = 0; b < bins.size(); ++b) {
    double sum = 0.0;
    for (const size_t i : bins[b]) sum += eta[i];
    calibration->bin_sizes.push_back(static_cast<int64_t>(bins[b].size()));
    calibration->bin_mean_eta.push_back(
        bins[b].empty() ? kNaN : sum / static_cast<double>(bins[b].size()));
    if (!std::isnan(calibration->bin_performance[b])) {
      index.push_back(static_cast<double>(b));
      performance.push_back(calibration->bin_performance[b]);
    }
  }
  // Sign flipped (HIB): performance falling with uncertainty is positive.
  calibration->kendall_tau = -KendallTauB(index, performance);
}

}  // namespace

const char* EtaBinningName(EtaBinning binning) {
  return binning == EtaBinning::kEqualWidth ? "equal_width" : "equal_count";
}

Status CalibrateAccuracy(const std::vector<double>& eta, const std::vector<uint8_t>& correct,
                         int num_bins, EtaBinning binning, UncertaintyCalibration* calibration) {
  if (eta.size() != correct.size()) {
    return Status::InvalidArgument("uncertainty calibration: " + std::to_string(eta.size()) +
                                   " eta values for " + std::to_string(correct.size()) +
                                   " outcomes");
  }
  std::vector<std::vector<size_t>> bins;
  HEDGEDB_RETURN_IF_ERROR(BinByEta(eta, num_bins, binning, &bins));
  UncertaintyCalibration out;
  out.binning = binning;
  for (const std::vector<size_t>& bin : bins) {
    int64_t hits = 0;
    for (const size_t i : bin) hits += correct[i] != 0 ? 1 : 0;
    out.bin_performance.push_back(
        bin.empty() ? kNaN : static_cast<double>(hits) / static_cast<double>(bin.size()));
  }
  FinishCalibration(eta, bins, &out);
  *calibration = std::move(out);
  return Status::OK();
}

Status ErrorRejectOfRecallAt1(const std::vector<double>& eta, const RetrievalMetrics& metrics,
                              UncertaintyCalibration* calibration) {
  if (eta.size() != metrics.top1_correct.size()) {
    return Status::InvalidArgument("error-versus-reject: " + std::to_string(eta.size()) +
                                   " eta values for " +
                                   std::to_string(metrics.top1_correct.size()) + " queries");
  }
  std::vector<double> confidence;
  std::vector<bool> correct;
  for (size_t q = 0; q < eta.size(); ++q) {
    if (std::isnan(eta[q])) {
      return Status::InvalidArgument("error-versus-reject: eta of query " + std::to_string(q) +
                                     " is NaN");
    }
    if (metrics.top1_correct[q] < 0) continue;  // lone: no recall@1 outcome
    confidence.push_back(-eta[q]);
    correct.push_back(metrics.top1_correct[q] == 1);
  }
  const ErrorRejectAreas areas = MeasureErrorReject(confidence, correct);
  calibration->erc_area = areas.area;
  calibration->erc_area_oracle = areas.oracle;
  calibration->erc_area_chance = areas.chance;
  calibration->erc_queries = static_cast<int64_t>(correct.size());
  return Status::OK();
}

Status CalibrateAveragePrecision(const std::vector<double>& pair_eta,
                                 const std::vector<double>& scores,
                                 const std::vector<uint8_t>& matches, int num_bins,
                                 EtaBinning binning, UncertaintyCalibration* calibration) {
  if (pair_eta.size() != scores.size() || scores.size() != matches.size()) {
    return Status::InvalidArgument("uncertainty calibration: " + std::to_string(pair_eta.size()) +
                                   " eta values, " + std::to_string(scores.size()) +
                                   " scores and " + std::to_string(matches.size()) +
                                   " match labels");
  }
  std::vector<std::vector<size_t>> bins;
  HEDGEDB_RETURN_IF_ERROR(BinByEta(pair_eta, num_bins, binning, &bins));
  UncertaintyCalibration out;
  out.binning = binning;
  for (const std::vector<size_t>& bin : bins) {
    std::vector<double> bin_scores;
    std::vector<uint8_t> bin_matches;
    for (const size_t i : bin) {
      bin_scores.push_back(scores[i]);
      bin_matches.push_back(matches[i]);
    }
    if (std::count(bin_matches.begin(), bin_matches.end(), 0) ==
        static_cast<std::ptrdiff_t>(bin_matches.size())) {
      out.bin_performance.push_back(kNaN);  // AP undefined without a match
      continue;
    }
    double ap = 0.0;
    HEDGEDB_RETURN_IF_ERROR(AveragePrecision(bin_scores, bin_matches, &ap));
    out.bin_performance.push_back(ap);
  }
  FinishCalibration(pair_eta, bins, &out);
  *calibration = std::move(out);
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
