#include "encoders/eval/evaluation.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/json_fields.h"
#include "encoders/data/batch_samplers.h"
#include "encoders/engine_bridge.h"
#include "encoders/eval/disentanglement.h"
#include "encoders/eval/episodes.h"
#include "encoders/eval/pq_baseline.h"
#include "hedgedb/calibration.h"
#include "hedgedb/match_parameters.h"
#include "hedgedb/score.h"

namespace hedgedb {
namespace encoders {
namespace {

using nlohmann::json;

// How `s` scores embeddings: as a collection of the model's embeddings
// (engine bridge) searched with the model's ranking score, samples and seed.
struct Scoring {
  CollectionSpec spec;
  ScoreOptions options;
};

Scoring ScoringOf(const Similarity& s) {
  Scoring scoring;
  scoring.spec = CollectionSpecForModel(s.spec, "evaluation");
  scoring.options.score = RankingScore(s.spec);
  scoring.options.samples = s.samples;
  scoring.options.has_seed = true;
  scoring.options.seed = s.seed;
  return scoring;
}

// Rows [first, first + count) of `all`, whose rows have c components of
// dimension d (codes: d symbols; logp: d x k values).
EmbeddingView RowsOfView(const EmbeddingView& all, int64_t c, int64_t d, int64_t k, int64_t first,
                         int64_t count) {
  EmbeddingView v = all;
  v.n = count;
  if (v.vec) v.vec += first * d;
  if (v.mean) v.mean += first * c * d;
  if (v.var) v.var += first * c * d;
  if (v.weights) v.weights += first * c;
  if (v.codes) v.codes += first * d;
  if (v.logp) v.logp += first * d * k;
  return v;
}

// Rows [first, first + count) of `e`.
EmbeddingView RowsOf(const Embeddings& e, int64_t first, int64_t count) {
  return RowsOfView(e.View(), e.components, e.dim, e.code_k, first, count);
}

// The first `count` rows of e (a copy).
Embeddings HeadRows(const Embeddings& e, int64_t count) {
  Embeddings head = e;
  head.n = std::min(count, e.n);
  auto cut = [&](auto* v) {
    if (!v->empty()) v->resize(v->size() / size_t(e.n) * size_t(head.n));
  };
  cut(&head.vec);
  cut(&head.mean);
  cut(&head.var);
  cut(&head.weights);
  cut(&head.logp);
  cut(&head.codes);
  return head;
}

// The embeddings are of the model's kind and sizes.
Status CheckFits(const Similarity& s, const Embeddings& e) {
  const CollectionSpec spec = CollectionSpecForModel(s.spec, "evaluation");
  if (e.kind != spec.kind || e.dim != spec.dim ||
      (spec.kind == Kind::kMog && e.components != spec.components) ||
      (spec.kind == Kind::kCodes && e.code_k != spec.code_k)) {
    return Status::InvalidArgument("embeddings (" + std::string(KindName(e.kind)) + " dim " +
                                   std::to_string(e.dim) + ") do not fit the model (" +
                                   DescribeForModel(spec) + ")");
  }
  return Status::OK();
}

Status CheckCompatible(const Similarity& s, const Embeddings& probes, const Embeddings& gallery) {
  HEDGEDB_RETURN_IF_ERROR(CheckFits(s, probes));
  return CheckFits(s, gallery);
}

double Entropy(const std::vector<double>& p) {
  double h = 0;
  for (double v : p) {
    if (v > 0) h -= v * std::log(v);
  }
  return h;
}

// Reports the steps of one evaluation to an EvaluationProgressFn (if set):
// Begin starts the next step, Advance counts one unit (from any thread), End
// reports the step complete.
class StepProgress {
 public:
  StepProgress(const EvaluationProgressFn& fn, int steps) : fn_(fn), steps_(steps) {}

  void Begin(const std::string& name, const char* unit, int64_t total) {
    name_ = name;
    unit_ = unit;
    total_ = total;
    done_ = 0;
    ++step_;
    Report(0);
  }
  void Advance() {
    const int64_t done = ++done_;
    if (done < total_) Report(done);  // End reports the last one
  }
  void End() { Report(total_); }
  // Advance as a callback (nullptr without a progress function: nothing to
  // count).
  std::function<void()> Advancer() {
    if (!fn_) return nullptr;
    return [this] { Advance(); };
  }

 private:
  void Report(int64_t done) const {
    if (!fn_) return;
    EvaluationProgress p;
    p.name = name_;
    p.unit = unit_;
    p.step = step_;
    p.steps = steps_;
    p.done = done;
    p.total = total_;
    fn_(p);
  }

  const EvaluationProgressFn& fn_;
  const int steps_;
  int step_ = 0;
  std::string name_;
  const char* unit_ = "";
  int64_t total_ = 0;
  std::atomic<int64_t> done_{0};
};

}  // namespace

json RetrievalJson(const RetrievalMetrics& m) {
  json j;
  for (size_t i = 0; i < m.recall_ks.size(); ++i) {
    j["recall_at_" + std::to_string(m.recall_ks[i])] = m.recall_at_k[i];
  }
  j["map_at_r"] = m.map_at_r;
  j["r_precision"] = m.r_precision;
  j["knn_accuracy"] = m.knn_accuracy;
  j["queries"] = m.num_queries;
  // The queries recall@k and MAP@R average over (the others have no
  // same-label gallery item).
  j["queries_with_relevant"] = m.num_queries_with_relevant;
  return j;
}

json CalibrationJson(const UncertaintyCalibration& c) {
  const auto number = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
  json j;
  j["binning"] = EtaBinningName(c.binning);
  j["kendall_tau"] = number(c.kendall_tau);
  json perf = json::array(), eta = json::array();
  for (size_t i = 0; i < c.bin_performance.size(); ++i) {
    perf.push_back(number(c.bin_performance[i]));
    eta.push_back(number(c.bin_mean_eta[i]));
  }
  j["bin_performance"] = perf;
  j["bin_mean_eta"] = eta;
  j["bin_sizes"] = c.bin_sizes;
  if (c.erc_queries > 0) {
    // Beside tau: the error-versus-reject area of recall@1 by eta, with the
    // two ends it lies between.
    j["erc_area"] = number(c.erc_area);
    j["erc_area_oracle"] = number(c.erc_area_oracle);
    j["erc_area_chance"] = number(c.erc_area_chance);
    j["erc_queries"] = c.erc_queries;
  }
  return j;
}

namespace {

// HIB 4.4's calibration in both EtaBinnings: `calibrate(binning, &c)` fills
// one; the equal-count bins go at the top level, the equal-width ones under
// "equal_width" (metrics.h says why both).
Status BothBinningsJson(const std::function<Status(EtaBinning, UncertaintyCalibration*)>& calibrate,
                        json* out) {
  UncertaintyCalibration count, width;
  HEDGEDB_RETURN_IF_ERROR(calibrate(EtaBinning::kEqualCount, &count));
  HEDGEDB_RETURN_IF_ERROR(calibrate(EtaBinning::kEqualWidth, &width));
  *out = CalibrationJson(count);
  (*out)["equal_width"] = CalibrationJson(width);
  return Status::OK();
}

// KNN accuracy per eta bin, and beside the equal-count bins the
// error-versus-reject area of recall@1 (it does not depend on the bins).
Status AccuracyCalibrationJson(const std::vector<double>& eta, const RetrievalMetrics& metrics,
                               int bins, json* out) {
  return BothBinningsJson(
      [&](EtaBinning binning, UncertaintyCalibration* c) {
        HEDGEDB_RETURN_IF_ERROR(CalibrateAccuracy(eta, metrics.knn_correct, bins, binning, c));
        return binning == EtaBinning::kEqualCount ? ErrorRejectOfRecallAt1(eta, metrics, c)
                                                  : Status::OK();
      },
      out);
}

}  // namespace

Status SimilarityMatrix(const Similarity& similarity, const Embeddings& probes,
                        const Embeddings& gallery, std::vector<float>* matrix) {
  HEDGEDB_RETURN_IF_ERROR(CheckCompatible(similarity, probes, gallery));
  const Scoring scoring = ScoringOf(similarity);
  return ScoreMatrix(scoring.spec, probes.View(), gallery.View(), scoring.options, matrix);
}

Status PairSimilarities(const Similarity& similarity, const Embeddings& probes,
                        const Embeddings& gallery, const std::vector<VerificationPair>& pairs,
                        std::vector<double>* scores, const std::function<void()>& advance) {
  HEDGEDB_RETURN_IF_ERROR(CheckCompatible(similarity, probes, gallery));
  const Scoring scoring = ScoringOf(similarity);
  const Embeddings& p = probes;
  const Embeddings& g = gallery;
  scores->clear();
  scores->reserve(pairs.size());
  std::vector<float> score;
  for (const VerificationPair& pair : pairs) {
    // Scores do not depend on the other items scored with them.
    HEDGEDB_RETURN_IF_ERROR(ScoreMatrix(scoring.spec, RowsOf(p, pair.first, 1),
                                        RowsOf(g, pair.second, 1), scoring.options, &score));
    scores->push_back(score[0]);
    if (advance) advance();
  }
  return Status::OK();
}

Status Uncertainties(const Similarity& similarity, const Embeddings& items,
                     std::vector<double>* eta) {
  eta->clear();
  if (items.kind != Kind::kGaussian && items.kind != Kind::kMog) return Status::OK();
  HEDGEDB_RETURN_IF_ERROR(CheckFits(similarity, items));
  // eta of the stored distribution (for SPE: s^2 + sigma_eps^2, as a
  // collection of these embeddings computes it).
  const Scoring scoring = ScoringOf(similarity);
  std::vector<float> values;
  HEDGEDB_RETURN_IF_ERROR(ItemUncertainties(scoring.spec, items.View(), scoring.options, &values));
  eta->assign(values.begin(), values.end());
  return Status::OK();
}

Status EvaluateRetrievalOn(const Similarity& similarity, const Embeddings& probes,
                           const Embeddings& gallery, const std::vector<int64_t>& labels,
                           RetrievalMetrics* metrics, bool reachable_only,
                           const std::function<void()>& advance) {
  HEDGEDB_RETURN_IF_ERROR(CheckCompatible(similarity, probes, gallery));
  if (static_cast<int64_t>(labels.size()) != probes.n || probes.n != gallery.n) {
    return Status::InvalidArgument("retrieval: probes, gallery and labels differ in count");
  }
  const Scoring scoring = ScoringOf(similarity);
  const Embeddings& p = probes;
  const EmbeddingView g = gallery.View();
  std::mutex error_mutex;
  Status score_status;
  // One probe at a time (rows are requested from several threads): the whole
  // matrix would not fit for large sets.
  const SimilarityRowFn row_fn = [&](int64_t q, float* row) {
    std::vector<float> scores;
    const Status s = ScoreMatrix(scoring.spec, RowsOf(p, q, 1), g, scoring.options, &scores);
    if (!s.ok()) {
      // Reported after the pass; a NaN row would also stop the metrics.
      std::lock_guard<std::mutex> lock(error_mutex);
      if (score_status.ok()) score_status = s;
      std::fill(row, row + gallery.n, 0.0f);
      return;
    }
    std::copy(scores.begin(), scores.end(), row);
    if (advance) advance();
  };
  RetrievalOptions options;
  const int64_t ranked = gallery.n - 1;
  if (reachable_only && ranked >= 1) {
    std::vector<int> ks;
    for (int k : options.recall_ks) {
      if (k <= ranked) ks.push_back(k);
    }
    options.recall_ks = ks;
    options.knn_k = static_cast<int>(std::min<int64_t>(options.knn_k, ranked));
  }
  const Status s = EvaluateRetrieval(row_fn, probes.n, labels, labels, options, metrics);
  HEDGEDB_RETURN_IF_ERROR(score_status);
  return s;
}

Status EvaluateEmbeddings(const CollectionSpec& given, const EmbeddingView& queries,
                          const EmbeddingView& gallery, const std::vector<int64_t>& query_labels,
                          const std::vector<int64_t>& gallery_labels,
                          const EmbeddingEvaluationOptions& options, json* report) {
  CollectionSpec spec = given;
  if (static_cast<int64_t>(query_labels.size()) != queries.n) {
    return Status::InvalidArgument("evaluation: " + std::to_string(queries.n) + " queries but " +
                                   std::to_string(query_labels.size()) + " query labels");
  }
  if (static_cast<int64_t>(gallery_labels.size()) != gallery.n) {
    return Status::InvalidArgument("evaluation: " + std::to_string(gallery.n) +
                                   " gallery items but " + std::to_string(gallery_labels.size()) +
                                   " gallery labels");
  }
  if (gallery.n < 1 || queries.n < 1) {
    return Status::InvalidArgument("evaluation: no queries or no gallery items");
  }
  const bool has_eta = spec.kind == Kind::kGaussian || spec.kind == Kind::kMog;
  bool fit_ab = options.fit_match_parameters && has_eta;
  std::string not_fitted;  // why they were not fitted (the defaults were kept)
  if (fit_ab) {
    const Status s = FitMatchParameters(spec, gallery, gallery_labels.data(),
                                        options.score.has_seed ? options.score.seed : spec.seed,
                                        &spec.match_a, &spec.match_b);
    if (!s.ok()) {
      fit_ab = false;
      not_fitted = "match_a and match_b were kept: " + s.message();
    }
  }
  StepProgress progress(options.progress, has_eta ? 2 : 1);
  progress.Begin("ranking", "queries", queries.n);
  std::vector<float> scores;
  {
    // Every query is checked once up front (ScoreMatrix against the first
    // item), so that an error names the query's row in the input, not in its
    // block.
    EmbeddingView first_item = gallery;
    first_item.n = 1;
    HEDGEDB_RETURN_IF_ERROR(ScoreMatrix(spec, queries, first_item, options.score, &scores));
  }
  // Rows are requested in query order (one thread): the block holding the
  // requested query is scored when first needed.
  RetrievalOptions retrieval = options.retrieval;
  retrieval.num_threads = 1;
  const int64_t block =
      std::max<int64_t>(1, std::min<int64_t>(queries.n, options.block_floats / gallery.n));
  int64_t block_begin = -1;
  Status score_status;
  const SimilarityRowFn rows = [&](int64_t q, float* row) {
    if (block_begin < 0 || q < block_begin || q >= block_begin + block) {
      block_begin = q - q % block;
      const EmbeddingView rows_view =
          RowsOfView(queries, spec.kind == Kind::kMog ? spec.components : 1, spec.dim, spec.code_k,
                     block_begin, std::min(block, queries.n - block_begin));
      const Status s = ScoreMatrix(spec, rows_view, gallery, options.score, &scores);
      if (!s.ok() && score_status.ok()) score_status = s;
    }
    if (!score_status.ok()) {
      // Reported after the pass (EvaluateRetrieval takes no error from a row).
      std::fill(row, row + gallery.n, 0.0f);
      return;
    }
    std::copy_n(scores.data() + (q - block_begin) * gallery.n, gallery.n, row);
    progress.Advance();
  };
  RetrievalMetrics metrics;
  const Status s =
      EvaluateRetrieval(rows, queries.n, query_labels, gallery_labels, retrieval, &metrics);
  HEDGEDB_RETURN_IF_ERROR(score_status);
  HEDGEDB_RETURN_IF_ERROR(s);
  progress.End();

  json out = RetrievalJson(metrics);
  out["kind"] = KindName(spec.kind);
  out["score"] = ScoreName(ResolveScore(spec.kind, options.score.score));
  out["gallery"] = gallery.n;
  out["leave_one_out"] = retrieval.exclude_same_index;
  out["knn_k"] = retrieval.knn_k;
  if (has_eta) {
    // Only these kinds draw Monte Carlo samples (mc scores, eta).
    out["samples"] = options.score.samples > 0 ? options.score.samples : spec.samples;
    out["seed"] = options.score.has_seed ? options.score.seed : spec.seed;
    std::vector<float> eta;
    progress.Begin("eta", "queries", queries.n);
    HEDGEDB_RETURN_IF_ERROR(ItemUncertainties(spec, queries, options.score, &eta));
    progress.End();
    double sum = 0.0;
    for (const float e : eta) sum += e;
    out["mean_eta"] = sum / static_cast<double>(eta.size());
    if (queries.n >= options.eta_bins) {
      json c;
      HEDGEDB_RETURN_IF_ERROR(AccuracyCalibrationJson(std::vector<double>(eta.begin(), eta.end()),
                                                      metrics, options.eta_bins, &c));
      c["performance"] = "knn_accuracy";
      out["eta_calibration"] = std::move(c);
    } else {
      out["eta_calibration_note"] = std::to_string(queries.n) + " queries cannot fill " +
                                    std::to_string(options.eta_bins) + " eta bins";
    }
  }
  if (spec.kind != Kind::kCodes) {
    out["match_a"] = JsonFloat(spec.match_a);
    out["match_b"] = JsonFloat(spec.match_b);
    if (has_eta) out["match_parameters"] = fit_ab ? "fitted" : "given";
    if (!not_fitted.empty()) out["match_parameters_note"] = not_fitted;
  }
  *report = std::move(out);
  return Status::OK();
}

namespace {

// Eq. 6-7 over the items `subset` (indices into codes/labels), in nats.
double FactorisedInformationOf(const Embeddings& codes, const std::vector<int64_t>& labels,
                               const std::vector<int64_t>& subset) {
  const int64_t d = codes.dim, k = codes.code_k;
  const double n = static_cast<double>(subset.size());
  if (codes.kind != Kind::kCodes || subset.empty()) return 0.0;
  std::vector<int64_t> classes;
  for (int64_t item : subset) classes.push_back(labels[size_t(item)]);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  double mi = 0;
  for (int64_t i = 0; i < d; ++i) {
    std::vector<double> marginal(k, 0.0);
    std::vector<std::vector<double>> per_class(classes.size(), std::vector<double>(k, 0.0));
    std::vector<int64_t> counts(classes.size(), 0);
    for (int64_t item : subset) {
      const size_t slot =
          std::lower_bound(classes.begin(), classes.end(), labels[size_t(item)]) - classes.begin();
      ++counts[slot];
      for (int64_t s = 0; s < k; ++s) {
        const double p = std::exp(static_cast<double>(codes.logp[(item * d + i) * k + s]));
        marginal[s] += p / n;
        per_class[slot][s] += p;
      }
    }
    double conditional = 0;
    for (size_t c = 0; c < classes.size(); ++c) {
      for (double& v : per_class[c]) v /= counts[c];
      conditional += static_cast<double>(counts[c]) / n * Entropy(per_class[c]);
    }
    mi += Entropy(marginal) - conditional;
  }
  return mi;
}

}  // namespace

double DimcoFactorisedInformation(const Embeddings& codes, const std::vector<int64_t>& labels) {
  std::vector<int64_t> all(static_cast<size_t>(codes.n));
  for (int64_t i = 0; i < codes.n; ++i) all[size_t(i)] = i;
  return FactorisedInformationOf(codes, labels, all);
}

Status DimcoBatchInformation(const Embeddings& codes, const std::vector<int64_t>& labels,
                             const BatchInformationOptions& options, BatchInformation* out) {
  if (codes.kind != Kind::kCodes) return Status::InvalidArgument("not a code embedding");
  if (options.classes < 2 || options.per_class < 1 || options.batches < 1) {
    return Status::InvalidArgument("batch estimate needs >= 2 classes, >= 1 item each, >= 1 batch");
  }
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < codes.n; ++i) by_class[labels[size_t(i)]].push_back(i);
  std::vector<const std::vector<int64_t>*> eligible;
  for (const auto& [label, items] : by_class) {
    if (static_cast<int64_t>(items.size()) >= options.per_class) eligible.push_back(&items);
  }
  if (static_cast<int64_t>(eligible.size()) < options.classes) {
    return Status::InvalidArgument("batch estimate needs " + std::to_string(options.classes) +
                                   " classes with >= " + std::to_string(options.per_class) +
                                   " items; the set has " + std::to_string(eligible.size()));
  }
  std::mt19937_64 rng(options.seed);
  std::vector<double> bits;
  std::vector<size_t> order(eligible.size());
  for (int64_t b = 0; b < options.batches; ++b) {
    for (size_t c = 0; c < order.size(); ++c) order[c] = c;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> batch;
    for (int64_t c = 0; c < options.classes; ++c) {
      std::vector<int64_t> items = *eligible[order[size_t(c)]];
      std::shuffle(items.begin(), items.end(), rng);
      batch.insert(batch.end(), items.begin(), items.begin() + options.per_class);
    }
    bits.push_back(FactorisedInformationOf(codes, labels, batch) / std::log(2.0));
  }
  double mean = 0, var = 0;
  for (double x : bits) mean += x / bits.size();
  for (double x : bits) var += (x - mean) * (x - mean);
  out->mean_bits = mean;
  out->sd_bits = bits.size() > 1 ? std::sqrt(var / (bits.size() - 1)) : 0.0;
  out->batches = options.batches;
  out->label_entropy_bits = std::log2(static_cast<double>(options.classes));
  return Status::OK();
}

json MergeRepeats(const std::vector<json>& runs) {
  const json& first = runs.front();
  if (runs.size() == 1) return first;
  if (first.is_object()) {
    json merged = json::object();
    for (const auto& [key, value] : first.items()) {
      std::vector<json> parts;
      for (const json& run : runs) parts.push_back(run.contains(key) ? run[key] : value);
      merged[key] = MergeRepeats(parts);
    }
    return merged;
  }
  if (first.is_array()) {
    for (const json& run : runs) {
      if (!run.is_array() || run.size() != first.size()) return first;
    }
    json merged = json::array();
    for (size_t i = 0; i < first.size(); ++i) {
      std::vector<json> parts;
      for (const json& run : runs) parts.push_back(run[i]);
      merged.push_back(MergeRepeats(parts));
    }
    return merged;
  }
  if (!first.is_number() && !first.is_null()) return first;
  // Numbers, some of them null where a repeat had none (an equal-width eta
  // bin that is empty in that repeat): the spread of the numbers, and how
  // many repeats had none.
  std::vector<double> values;
  size_t missing = 0;
  bool all_equal = true;
  for (const json& run : runs) {
    if (run.is_null()) {
      ++missing;
    } else if (run.is_number()) {
      values.push_back(run.get<double>());
      all_equal = all_equal && run == runs.front();
    } else {
      return first;
    }
  }
  if (values.empty() || (missing == 0 && all_equal)) return first;
  const double n = static_cast<double>(values.size());
  double sum = 0;
  for (const double v : values) sum += v;
  const double mean = sum / n;
  double squares = 0;
  for (const double v : values) squares += (v - mean) * (v - mean);
  json merged = {{"mean", mean},
                 {"sd", values.size() > 1 ? json(std::sqrt(squares / (n - 1))) : json(nullptr)},
                 {"repeats", values.size()}};
  if (missing > 0) merged["missing"] = missing;
  return merged;
}

Status EvaluateModel(const EncoderModel& model, const EncoderData& data,
                     const EvaluationOptions& options, json* report, CalibrationReport* calibration,
                     CalibrationQuality* shifted) {
  const ItemSet* set = nullptr;
  HEDGEDB_RETURN_IF_ERROR(SelectSplit(data, options.split, &set));
  if (options.samples < 1 || options.eta_bins < 2 || options.verification_pairs < 2 ||
      options.mc_repeats < 1) {
    return Status::InvalidArgument(
        "evaluation needs samples >= 1, eta bins >= 2, pairs >= 2, Monte Carlo repeats >= 1");
  }
  const ModelSpec spec = model.spec();
  PqOptions pq;
  if (!options.pq.empty()) {  // checked before any embedding is computed
    HEDGEDB_RETURN_IF_ERROR(ParsePqSpec(options.pq, &pq));
    if (spec.kind != Kind::kPoint) {
      return Status::InvalidArgument("product quantization (" + options.pq +
                                     ") needs a point model; this one is " + KindName(spec.kind));
    }
    pq.seed = options.seed;
  }
  if (options.episodes > 0) HEDGEDB_RETURN_IF_ERROR(RequireEpisodeRule(spec));
  if (options.disentanglement) {
    if (data.factor_sizes.empty()) {
      return Status::InvalidArgument("disentanglement needs data with factors (N-item composites)");
    }
    if (spec.kind != Kind::kPoint && spec.kind != Kind::kGaussian) {
      return Status::InvalidArgument(
          std::string("disentanglement needs point or Gaussian embeddings; this model's are ") +
          KindName(spec.kind));
    }
  }
  const std::vector<int64_t> items = SubsetItems(*set, options.max_items, options.seed);
  if (items.size() < 10) {
    return Status::InvalidArgument("the " + options.split + " split has only " +
                                   std::to_string(items.size()) + " items (need >= 10)");
  }
  std::vector<int64_t> labels;
  for (int64_t i : items) labels.push_back(set->labels[i]);

  Similarity similarity;
  similarity.spec = spec;
  similarity.samples = options.samples;
  if (spec.kind == Kind::kMog && options.samples % spec.components != 0) {
    similarity.samples = (options.samples / static_cast<int>(spec.components) + 1) *
                         static_cast<int>(spec.components);
  }
  similarity.seed = options.seed;

  const bool stochastic = spec.kind == Kind::kGaussian || spec.kind == Kind::kMog;
  const int repeats = stochastic ? options.mc_repeats : 1;
  // The steps below, counted up front for the progress report: the
  // embeddings; per repeat eta (stochastic), verification and retrieval
  // cases; then the optional parts.
  const int twins = data.has_corrupt ? 1 : 0;
  const int steps = 1 + twins + repeats * ((stochastic ? 1 : 0) + (1 + twins) + (1 + 2 * twins)) +
                    (calibration ? 1 : 0) + (options.pq.empty() ? 0 : 1) +
                    (options.episodes > 0 ? 1 : 0) + (options.disentanglement ? 1 : 0) +
                    (spec.kind == Kind::kCodes ? 1 : 0);
  StepProgress progress(options.progress, steps);
  const auto items_count = static_cast<int64_t>(items.size());

  Embeddings clean, corrupt;
  progress.Begin("embedding", "items", items_count);
  HEDGEDB_RETURN_IF_ERROR(model.Embed(*set, items, /*corrupt=*/false, &clean));
  progress.End();
  if (data.has_corrupt) {
    progress.Begin("embedding corrupt", "items", items_count);
    HEDGEDB_RETURN_IF_ERROR(model.Embed(*set, items, /*corrupt=*/true, &corrupt));
    progress.End();
  }

  json out;
  out["method"] = MethodName(spec.method);
  out["kind"] = KindName(spec.kind);
  out["data"] = data.description;
  out["split"] = options.split;
  out["items"] = static_cast<int64_t>(items.size());
  out["split_items"] = set->size();
  // A subset's numbers are not the split's benchmark numbers: say so beside them.
  if (static_cast<int64_t>(items.size()) < set->size()) {
    out["subset"] = std::to_string(items.size()) + " of the " + std::to_string(set->size()) +
                    " items of the split (max_items 0 scores them all)";
  }
  out["classes"] = [&] {
    std::vector<int64_t> c = labels;
    std::sort(c.begin(), c.end());
    return static_cast<int64_t>(std::unique(c.begin(), c.end()) - c.begin());
  }();
  out["samples"] = similarity.samples;
  out["similarity"] = ScoreName(ScoringOf(similarity).options.score);
  if (spec.kind == Kind::kGaussian || spec.kind == Kind::kMog || spec.kind == Kind::kPoint) {
    out["match_a"] = JsonFloat(spec.match_a);
    out["match_b"] = JsonFloat(spec.match_b);
  }
  if (GetMethodInfo(spec.method).sigma_eps2) out["sigma_eps2"] = spec.sigma_eps2;

  std::vector<VerificationPair> pairs;
  HEDGEDB_RETURN_IF_ERROR(
      SampleVerificationPairs(labels, options.verification_pairs, options.seed, &pairs));
  std::vector<uint8_t> matches;
  for (const auto& p : pairs) matches.push_back(p.match ? 1 : 0);

  // What draws Monte Carlo samples (eta; scores of stochastic models) is
  // measured once per repeat, each with its own sample seed, on the same
  // items and pairs; MergeRepeats reports the spread.
  const auto measure = [&](const Similarity& run_similarity, const std::string& repeat_text,
                           json& run, std::vector<double>& run_eta_clean,
                           std::vector<double>& run_eta_corrupt) -> Status {
    if (stochastic) progress.Begin("eta" + repeat_text, "items", items_count * (1 + twins));
    HEDGEDB_RETURN_IF_ERROR(Uncertainties(run_similarity, clean, &run_eta_clean));
    if (data.has_corrupt)
      HEDGEDB_RETURN_IF_ERROR(Uncertainties(run_similarity, corrupt, &run_eta_corrupt));
    if (stochastic) {
      progress.End();
      auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return v.empty() ? 0.0 : s / v.size();
      };
      run["mean_eta"]["clean"] = mean(run_eta_clean);
      if (data.has_corrupt) run["mean_eta"]["corrupt"] = mean(run_eta_corrupt);
    }

    // Verification (HIB 4.3): pairs of clean images, pairs of corrupt images.
    struct VerificationCase {
      const char* name;
      const Embeddings* embeddings;
      const std::vector<double>* eta;
    };
    std::vector<VerificationCase> verification = {{"clean", &clean, &run_eta_clean}};
    if (data.has_corrupt) verification.push_back({"corrupt", &corrupt, &run_eta_corrupt});
    for (const VerificationCase& c : verification) {
      std::vector<double> scores;
      progress.Begin(std::string("verification ") + c.name + repeat_text, "pairs",
                     static_cast<int64_t>(pairs.size()));
      HEDGEDB_RETURN_IF_ERROR(PairSimilarities(run_similarity, *c.embeddings, *c.embeddings, pairs,
                                               &scores, progress.Advancer()));
      progress.End();
      double ap = 0;
      HEDGEDB_RETURN_IF_ERROR(AveragePrecision(scores, matches, &ap));
      json v;
      v["average_precision"] = ap;
      v["pairs"] = static_cast<int64_t>(pairs.size());
      if (stochastic) {
        std::vector<double> pair_eta;
        for (const auto& p : pairs) {
          pair_eta.push_back(0.5 * ((*c.eta)[p.first] + (*c.eta)[p.second]));
        }
        HEDGEDB_RETURN_IF_ERROR(BothBinningsJson(
            [&](EtaBinning binning, UncertaintyCalibration* c) {
              return CalibrateAveragePrecision(pair_eta, scores, matches, options.eta_bins, binning,
                                               c);
            },
            &v["eta_calibration"]));
      }
      run["verification"][c.name] = v;
    }

    // Identification (HIB 4.3 and appendix G): clean probes against a clean
    // gallery ("clean") and against the corrupt twins ("corrupt", Table 1);
    // corrupt probes against the clean gallery ("corrupt_probe", Table 6).
    struct RetrievalCase {
      const char* name;
      const Embeddings* probes;
      const Embeddings* gallery;
      const std::vector<double>* probe_eta;
    };
    std::vector<RetrievalCase> retrieval = {{"clean", &clean, &clean, &run_eta_clean}};
    if (data.has_corrupt) {
      retrieval.push_back({"corrupt", &clean, &corrupt, &run_eta_clean});
      retrieval.push_back({"corrupt_probe", &corrupt, &clean, &run_eta_corrupt});
    }
    for (const RetrievalCase& c : retrieval) {
      RetrievalMetrics metrics;
      progress.Begin(std::string("retrieval ") + c.name + repeat_text, "queries", c.probes->n);
      HEDGEDB_RETURN_IF_ERROR(EvaluateRetrievalOn(run_similarity, *c.probes, *c.gallery, labels,
                                                  &metrics, false, progress.Advancer()));
      progress.End();
      json r = RetrievalJson(metrics);
      if (stochastic) {
        HEDGEDB_RETURN_IF_ERROR(AccuracyCalibrationJson(*c.probe_eta, metrics, options.eta_bins,
                                                        &r["eta_calibration"]));
      }
      run["retrieval"][c.name] = r;
    }
    return Status::OK();
  };
  std::vector<double> eta_clean, eta_corrupt;
  std::vector<json> runs(static_cast<size_t>(repeats));
  for (int r = 0; r < repeats; ++r) {
    Similarity repeat = similarity;
    if (r > 0) repeat.seed = SeededRng::DeriveSeed(options.seed, 0x5EED0000u + uint64_t(r));
    std::vector<double> other_clean, other_corrupt;
    const std::string repeat_text =
        repeats > 1 ? " (repeat " + std::to_string(r + 1) + "/" + std::to_string(repeats) + ")"
                    : "";
    HEDGEDB_RETURN_IF_ERROR(measure(repeat, repeat_text, runs[size_t(r)],
                                    r == 0 ? eta_clean : other_clean,
                                    r == 0 ? eta_corrupt : other_corrupt));
  }
  out.update(MergeRepeats(runs));
  out["mc_repeats"] = repeats;

  if (calibration) {
    // Clean probes against the clean gallery, each leaving itself out: the
    // labelled pairs a collection of these items is calibrated on. The items
    // are a seeded random subset, so the first rows are a random sample.
    const int64_t n = static_cast<int64_t>(labels.size());
    const int64_t probes = std::min<int64_t>(n, std::max<int64_t>(1, 1000000 / n));
    progress.Begin("calibration", "queries", probes);
    // The collection's score (match for points), which calibrate maps.
    Scoring scoring = ScoringOf(similarity);
    scoring.options.score = ModelScore(similarity.spec);
    std::vector<float> matrix;
    HEDGEDB_RETURN_IF_ERROR(ScoreMatrix(scoring.spec, HeadRows(clean, probes).View(), clean.View(),
                                        scoring.options, &matrix));
    std::vector<int64_t> self(static_cast<size_t>(probes));
    for (int64_t q = 0; q < probes; ++q) self[size_t(q)] = q;
    std::vector<float> probe_eta(eta_clean.begin(),
                                 eta_clean.begin() + (eta_clean.empty() ? 0 : probes));
    std::string map_bytes;
    const Status s = CalibrateScoreMatrix(
        ResolveScore(scoring.spec.kind, scoring.options.score), matrix.data(), probes, n,
        labels.data(), labels.data(), self.data(), probe_eta.empty() ? nullptr : probe_eta.data(),
        options.seed, &map_bytes, calibration);
    // The other metrics stand without it (e.g. a split with one class).
    if (!s.ok()) out["calibration_error"] = s.ToString();
    if (s.ok() && shifted && data.has_corrupt) {
      // The same probes occluded, against the clean gallery without their
      // own clean twin: the map fitted above meets a shift it never saw.
      HEDGEDB_RETURN_IF_ERROR(ScoreMatrix(scoring.spec, HeadRows(corrupt, probes).View(),
                                          clean.View(), scoring.options, &matrix));
      std::vector<float> corrupt_eta(eta_corrupt.begin(),
                                     eta_corrupt.begin() + (eta_corrupt.empty() ? 0 : probes));
      const Status m = MeasureCalibrationScoreMatrix(
          map_bytes, matrix.data(), probes, n, labels.data(), labels.data(), self.data(),
          corrupt_eta.empty() ? nullptr : corrupt_eta.data(), shifted);
      if (!m.ok()) out["calibration_shift_error"] = m.ToString();
    }
    progress.End();
  }

  if (!options.pq.empty()) {
    progress.Begin("product quantization", "steps", 1);
    Embeddings train;
    HEDGEDB_RETURN_IF_ERROR(model.Embed(
        data.train, SubsetItems(data.train, pq.max_train, options.seed), false, &train));
    json& j = out["pq"];
    j["spec"] = options.pq;
    j["code_bits"] = pq.subquantizers * pq.bits;
    j["train_items"] = train.n;
    struct PqCase {
      const char* name;
      const Embeddings* gallery;
    };
    std::vector<PqCase> cases = {{"clean", &clean}};
    if (data.has_corrupt) cases.push_back({"corrupt", &corrupt});
    for (const PqCase& c : cases) {  // clean probes, uncompressed, against coded items
      RetrievalMetrics metrics;
      HEDGEDB_RETURN_IF_ERROR(PqRetrieval(train, clean, *c.gallery, labels, pq, &metrics));
      j["retrieval"][c.name] = RetrievalJson(metrics);
    }
    progress.End();
  }

  if (options.episodes > 0) {
    progress.Begin("episodes", "episodes", options.episodes);
    EpisodicOptions eo;
    eo.episodes = options.episodes;
    eo.shots = options.shots;
    eo.queries = options.queries;
    eo.samples = options.samples;
    eo.seed = options.seed;
    EpisodeResult episodes;
    HEDGEDB_RETURN_IF_ERROR(EvaluateEpisodes(spec, clean, data.has_corrupt ? corrupt : Embeddings(),
                                             labels, eo, &episodes));
    json& j = out["episodes"];
    j["episodes"] = eo.episodes;
    j["shots"] = eo.shots;
    j["queries"] = eo.queries;
    j["classes"] = episodes.classes;
    j["skipped_classes"] = episodes.skipped_classes;
    j["rule"] = spec.kind == Kind::kPoint ? "nearest support mean" : "SPE posterior";
    const auto accuracy = [](const EpisodeAccuracy& a) {
      return json{{"mean", a.mean}, {"sd_over_episodes", a.sd}};
    };
    j["accuracy"]["clean"] = accuracy(episodes.clean);
    if (data.has_corrupt) {
      j["accuracy"]["corrupt_support"] = accuracy(episodes.corrupt_support);
      j["accuracy"]["corrupt_query"] = accuracy(episodes.corrupt_query);
    }
    progress.End();
  }

  if (options.disentanglement) {
    progress.Begin("disentanglement", "steps", 1);
    constexpr int64_t kTrainItems = 5000;
    const std::vector<int64_t> train_items = SubsetItems(data.train, kTrainItems, options.seed);
    Embeddings train;
    HEDGEDB_RETURN_IF_ERROR(model.Embed(data.train, train_items, false, &train));
    std::vector<int64_t> train_labels;
    for (int64_t i : train_items) train_labels.push_back(data.train.labels[size_t(i)]);
    const auto matrix = [](const Embeddings& e) {  // point vectors or Gaussian means
      return EmbeddingMatrix{e.kind == Kind::kPoint ? e.vec.data() : e.mean.data(), e.n, e.dim};
    };
    std::vector<int64_t> train_factors, test_factors;
    HEDGEDB_RETURN_IF_ERROR(FactorsOfLabels(train_labels, data.factor_sizes, &train_factors));
    HEDGEDB_RETURN_IF_ERROR(FactorsOfLabels(labels, data.factor_sizes, &test_factors));
    json& j = out["disentanglement"];
    j["factors"] = data.factor_sizes;
    constexpr int kBins = 20;  // the F-statistic paper's histogram
    ModularityResult modularity;
    const Status ms =
        Modularity(matrix(clean), test_factors, data.factor_sizes, kBins, &modularity);
    if (ms.ok()) {
      j["modularity"] = modularity.modularity;
      j["modularity_dimensions"] = modularity.dimensions_scored;
      j["modularity_bins"] = kBins;
    } else {
      j["modularity_error"] = ms.ToString();  // e.g. one factor: N - 1 = 0
    }
    ExplicitnessResult explicitness;
    HEDGEDB_RETURN_IF_ERROR(Explicitness(matrix(train), train_factors, matrix(clean), test_factors,
                                         data.factor_sizes, ExplicitnessOptions(), &explicitness));
    j["explicitness"] = explicitness.explicitness;
    j["explicitness_per_factor"] = explicitness.per_factor;
    j["explicitness_values"] = explicitness.values_scored;
    j["train_items"] = train.n;
    progress.End();
  }

  if (spec.kind == Kind::kCodes) {
    // DIMCO's I(X~; Y) estimate (eq. 6-7) as its supplement computes it: on
    // class-balanced batches (5 classes x 16 items), averaged over batches.
    // Eq. 6 sums per-dimension entropies, so the estimate is not a mutual
    // information: it can exceed H(Y) of a batch (log2 5 bits) when code
    // dimensions repeat each other. It ranks models; it is not a number of bits
    // about the labels.
    auto batch_json = [&](const Embeddings& codes, json* j) -> Status {
      BatchInformationOptions o;
      o.seed = options.seed;
      BatchInformation info;
      const Status s = DimcoBatchInformation(codes, labels, o, &info);
      if (!s.ok()) {
        (*j)["error"] = s.ToString();
        return Status::OK();
      }
      *j = {
          {"mean_bits", info.mean_bits},    {"sd_bits", info.sd_bits},
          {"batches", info.batches},        {"classes_per_batch", o.classes},
          {"items_per_class", o.per_class}, {"batch_label_entropy_bits", info.label_entropy_bits}};
      return Status::OK();
    };
    progress.Begin("code information", "steps", 1);
    json& dimco = out["dimco"];
    HEDGEDB_RETURN_IF_ERROR(batch_json(clean, &dimco["factorised_information_batches"]));
    if (data.has_corrupt) {
      HEDGEDB_RETURN_IF_ERROR(
          batch_json(corrupt, &dimco["factorised_information_batches_corrupt"]));
    }
    // The same sum over the whole evaluated set, for comparison with older
    // reports (which called it I(X~;Y)); with many classes it far exceeds
    // what any batch estimate reaches.
    dimco["factorised_information_whole_set_bits"] =
        DimcoFactorisedInformation(clean, labels) / std::log(2.0);
    dimco["code_bits"] = spec.code_dims * std::log2(static_cast<double>(spec.code_k));
    progress.End();
  }
  *report = std::move(out);
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
