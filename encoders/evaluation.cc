#include "encoders/evaluation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "encoders/engine_bridge.h"
#include "query/scorer.h"

namespace hedgedb {
namespace encoders {
namespace {

using nlohmann::json;

// Rows in the scorer's layout (query/scorer.h): items and, for codes, the
// query tables.
struct ScorerRows {
  query::RowShape shape;
  query::ScoreParams params;
  std::vector<float> float_rows;   // point/gaussian/mog items and queries
  std::vector<uint8_t> code_rows;  // codes items
  size_t stride_bytes = 0;
  const void* base() const {
    return shape.kind == Kind::kCodes ? static_cast<const void*>(code_rows.data())
                                      : static_cast<const void*>(float_rows.data());
  }
};

bool IsSpe(const ModelSpec& spec) { return spec.method == Method::kSpe; }

query::RowShape ShapeOf(const Embeddings& e) {
  query::RowShape shape;
  shape.kind = e.kind;
  shape.dim = static_cast<int>(e.dim);
  shape.components = static_cast<int>(e.components);
  shape.code_k = static_cast<int>(e.code_k);
  return shape;
}

query::ScoreParams ParamsOf(const Similarity& s) {
  query::ScoreParams params;
  params.samples = s.samples;
  params.seed = s.seed;
  params.score = ModelScore(s.spec);
  params.match_a = MatchA(s.spec);
  params.match_b = MatchB(s.spec);
  return params;
}

// Item rows (as_query false) or query rows (as_query true) of `e`. SPE adds
// sigma_eps^2 to every variance so that MLS compares instance distributions
// around a shared prototype.
ScorerRows BuildRows(const Similarity& s, const Embeddings& e, bool as_query) {
  ScorerRows rows;
  rows.shape = ShapeOf(e);
  rows.params = ParamsOf(s);
  const int64_t n = e.n;
  const int64_t d = e.dim;
  const float var_offset = IsSpe(s.spec) ? static_cast<float>(s.spec.sigma_eps2) : 0.0f;
  switch (e.kind) {
    case Kind::kPoint:
      rows.float_rows = e.vec;
      break;
    case Kind::kGaussian:
      rows.float_rows.resize(n * 2 * d);
      for (int64_t i = 0; i < n; ++i) {
        float* row = rows.float_rows.data() + i * 2 * d;
        for (int64_t j = 0; j < d; ++j) {
          row[j] = e.mean[i * d + j];
          row[d + j] = e.var[i * d + j] + var_offset;
        }
      }
      break;
    case Kind::kMog: {
      const int64_t c = e.components;
      const int64_t width = c * (1 + 2 * d);
      rows.float_rows.resize(n * width);
      for (int64_t i = 0; i < n; ++i) {
        float* row = rows.float_rows.data() + i * width;
        std::copy(e.weights.begin() + i * c, e.weights.begin() + (i + 1) * c, row);
        std::copy(e.mean.begin() + i * c * d, e.mean.begin() + (i + 1) * c * d, row + c);
        for (int64_t j = 0; j < c * d; ++j) row[c + c * d + j] = e.var[i * c * d + j] + var_offset;
      }
      break;
    }
    case Kind::kCodes:
      if (as_query) {
        rows.float_rows = e.logp;
      } else {
        rows.code_rows.resize(e.codes.size());
        for (size_t i = 0; i < e.codes.size(); ++i) {
          rows.code_rows[i] = static_cast<uint8_t>(e.codes[i]);
        }
      }
      break;
  }
  rows.stride_bytes =
      e.kind == Kind::kCodes && !as_query
          ? rows.shape.item_row_size()
          : (as_query ? rows.shape.query_row_size() : rows.shape.item_row_size()) * sizeof(float);
  return rows;
}

Status CheckCompatible(const Embeddings& probes, const Embeddings& gallery) {
  if (probes.kind != gallery.kind || probes.dim != gallery.dim ||
      probes.components != gallery.components || probes.code_k != gallery.code_k) {
    return Status::InvalidArgument("probe and gallery embeddings differ in kind or size");
  }
  return Status::OK();
}

double Entropy(const std::vector<double>& p) {
  double h = 0;
  for (double v : p) {
    if (v > 0) h -= v * std::log(v);
  }
  return h;
}

json RetrievalJson(const RetrievalMetrics& m) {
  json j;
  for (size_t i = 0; i < m.recall_ks.size(); ++i) {
    j["recall_at_" + std::to_string(m.recall_ks[i])] = m.recall_at_k[i];
  }
  j["map_at_r"] = m.map_at_r;
  j["r_precision"] = m.r_precision;
  j["knn_accuracy"] = m.knn_accuracy;
  j["queries"] = m.num_queries;
  return j;
}

json CalibrationJson(const UncertaintyCalibration& c) {
  json j;
  j["kendall_tau"] = std::isnan(c.kendall_tau) ? json(nullptr) : json(c.kendall_tau);
  json perf = json::array(), eta = json::array();
  for (size_t i = 0; i < c.bin_performance.size(); ++i) {
    perf.push_back(std::isnan(c.bin_performance[i]) ? json(nullptr) : json(c.bin_performance[i]));
    eta.push_back(c.bin_mean_eta[i]);
  }
  j["bin_performance"] = perf;
  j["bin_mean_eta"] = eta;
  return j;
}

}  // namespace

Status SimilarityMatrix(const Similarity& similarity, const Embeddings& probes,
                        const Embeddings& gallery, std::vector<float>* matrix) {
  HEDGEDB_RETURN_IF_ERROR(CheckCompatible(probes, gallery));
  const ScorerRows queries = BuildRows(similarity, probes, /*as_query=*/true);
  const ScorerRows items = BuildRows(similarity, gallery, /*as_query=*/false);
  std::vector<int64_t> all(gallery.n);
  for (int64_t i = 0; i < gallery.n; ++i) all[i] = i;
  matrix->assign(static_cast<size_t>(probes.n * gallery.n), 0.0f);
  const size_t qstride = queries.shape.query_row_size();
  for (int64_t q = 0; q < probes.n; ++q) {
    std::unique_ptr<query::PreparedQuery> prepared;
    HEDGEDB_RETURN_IF_ERROR(query::PrepareQuery(
        queries.shape, queries.params, queries.float_rows.data() + q * qstride, &prepared));
    prepared->ScoreRows(items.base(), items.stride_bytes, all.data(), all.size(),
                        matrix->data() + q * gallery.n);
  }
  return Status::OK();
}

Status PairSimilarities(const Similarity& similarity, const Embeddings& probes,
                        const Embeddings& gallery, const std::vector<VerificationPair>& pairs,
                        std::vector<double>* scores) {
  HEDGEDB_RETURN_IF_ERROR(CheckCompatible(probes, gallery));
  const ScorerRows queries = BuildRows(similarity, probes, /*as_query=*/true);
  const ScorerRows items = BuildRows(similarity, gallery, /*as_query=*/false);
  const size_t qstride = queries.shape.query_row_size();
  scores->clear();
  scores->reserve(pairs.size());
  for (const VerificationPair& pair : pairs) {
    std::unique_ptr<query::PreparedQuery> prepared;
    HEDGEDB_RETURN_IF_ERROR(query::PrepareQuery(queries.shape, queries.params,
                                                queries.float_rows.data() + pair.first * qstride,
                                                &prepared));
    float score = 0;
    const int64_t row = pair.second;
    prepared->ScoreRows(items.base(), items.stride_bytes, &row, 1, &score);
    scores->push_back(score);
  }
  return Status::OK();
}

std::vector<double> Uncertainties(const Similarity& similarity, const Embeddings& items) {
  std::vector<double> eta;
  if (items.kind != Kind::kGaussian && items.kind != Kind::kMog) return eta;
  // eta is defined by the match probability, whatever the retrieval score.
  Similarity match = similarity;
  if (IsSpe(match.spec)) match.spec.sigma_eps2 = 0;  // the embedding's own spread
  ScorerRows rows = BuildRows(match, items, /*as_query=*/false);
  rows.params.score = ScoreType::kMc;
  const size_t stride = rows.shape.item_row_size();
  eta.reserve(items.n);
  for (int64_t i = 0; i < items.n; ++i) {
    eta.push_back(query::Uncertainty(rows.shape, rows.params, rows.float_rows.data() + i * stride));
  }
  return eta;
}

Status EvaluateRetrievalOn(const Similarity& similarity, const Embeddings& probes,
                           const Embeddings& gallery, const std::vector<int64_t>& labels,
                           RetrievalMetrics* metrics, bool reachable_only) {
  HEDGEDB_RETURN_IF_ERROR(CheckCompatible(probes, gallery));
  if (static_cast<int64_t>(labels.size()) != probes.n || probes.n != gallery.n) {
    return Status::InvalidArgument("retrieval: probes, gallery and labels differ in count");
  }
  const ScorerRows queries = BuildRows(similarity, probes, /*as_query=*/true);
  const ScorerRows items = BuildRows(similarity, gallery, /*as_query=*/false);
  std::vector<int64_t> all(gallery.n);
  for (int64_t i = 0; i < gallery.n; ++i) all[i] = i;
  const size_t qstride = queries.shape.query_row_size();
  Status prepare_status;
  const SimilarityRowFn row_fn = [&](int64_t q, float* row) {
    std::unique_ptr<query::PreparedQuery> prepared;
    const Status s = query::PrepareQuery(queries.shape, queries.params,
                                         queries.float_rows.data() + q * qstride, &prepared);
    if (!s.ok()) {
      // Reported after the pass; a NaN row would also stop the metrics.
      if (prepare_status.ok()) prepare_status = s;
      std::fill(row, row + gallery.n, 0.0f);
      return;
    }
    prepared->ScoreRows(items.base(), items.stride_bytes, all.data(), all.size(), row);
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
  HEDGEDB_RETURN_IF_ERROR(prepare_status);
  return s;
}

double DimcoMutualInformation(const Embeddings& codes, const std::vector<int64_t>& labels) {
  const int64_t d = codes.dim, k = codes.code_k, n = codes.n;
  if (codes.kind != Kind::kCodes || n == 0) return 0.0;
  std::vector<int64_t> classes = labels;
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  double mi = 0;
  for (int64_t i = 0; i < d; ++i) {
    std::vector<double> marginal(k, 0.0);
    std::vector<std::vector<double>> per_class(classes.size(), std::vector<double>(k, 0.0));
    std::vector<int64_t> counts(classes.size(), 0);
    for (int64_t item = 0; item < n; ++item) {
      const size_t slot =
          std::lower_bound(classes.begin(), classes.end(), labels[item]) - classes.begin();
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

Status EvaluateModel(const EncoderModel& model, const EncoderData& data,
                     const EvaluationOptions& options, json* report) {
  const ItemSet* set = nullptr;
  HEDGEDB_RETURN_IF_ERROR(SelectSplit(data, options.split, &set));
  if (options.samples < 1 || options.eta_bins < 2 || options.verification_pairs < 2) {
    return Status::InvalidArgument("evaluation needs samples >= 1, eta bins >= 2, pairs >= 2");
  }
  const ModelSpec spec = model.spec();
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

  Embeddings clean, corrupt;
  HEDGEDB_RETURN_IF_ERROR(model.Embed(*set, items, /*corrupt=*/false, &clean));
  if (data.has_corrupt) {
    HEDGEDB_RETURN_IF_ERROR(model.Embed(*set, items, /*corrupt=*/true, &corrupt));
  }
  const bool stochastic = spec.kind == Kind::kGaussian || spec.kind == Kind::kMog;

  json out;
  out["method"] = MethodName(spec.method);
  out["kind"] = KindName(spec.kind);
  out["data"] = data.description;
  out["split"] = options.split;
  out["items"] = static_cast<int64_t>(items.size());
  out["classes"] = [&] {
    std::vector<int64_t> c = labels;
    std::sort(c.begin(), c.end());
    return static_cast<int64_t>(std::unique(c.begin(), c.end()) - c.begin());
  }();
  out["samples"] = similarity.samples;
  out["similarity"] = ScoreName(ParamsOf(similarity).score);
  if (spec.kind == Kind::kGaussian || spec.kind == Kind::kMog || spec.kind == Kind::kPoint) {
    out["match_a"] = spec.match_a;
    out["match_b"] = spec.match_b;
  }
  if (IsSpe(spec)) out["sigma_eps2"] = spec.sigma_eps2;

  std::vector<VerificationPair> pairs;
  HEDGEDB_RETURN_IF_ERROR(
      SampleVerificationPairs(labels, options.verification_pairs, options.seed, &pairs));
  std::vector<uint8_t> matches;
  for (const auto& p : pairs) matches.push_back(p.match ? 1 : 0);

  const std::vector<double> eta_clean = Uncertainties(similarity, clean);
  const std::vector<double> eta_corrupt =
      data.has_corrupt ? Uncertainties(similarity, corrupt) : std::vector<double>();
  if (stochastic) {
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return v.empty() ? 0.0 : s / v.size();
    };
    out["mean_eta"]["clean"] = mean(eta_clean);
    if (data.has_corrupt) out["mean_eta"]["corrupt"] = mean(eta_corrupt);
  }

  // Verification (HIB 4.3): pairs of clean images, pairs of corrupt images.
  struct VerificationCase {
    const char* name;
    const Embeddings* embeddings;
    const std::vector<double>* eta;
  };
  std::vector<VerificationCase> verification = {{"clean", &clean, &eta_clean}};
  if (data.has_corrupt) verification.push_back({"corrupt", &corrupt, &eta_corrupt});
  for (const VerificationCase& c : verification) {
    std::vector<double> scores;
    HEDGEDB_RETURN_IF_ERROR(
        PairSimilarities(similarity, *c.embeddings, *c.embeddings, pairs, &scores));
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
      UncertaintyCalibration calibration;
      HEDGEDB_RETURN_IF_ERROR(
          CalibrateAveragePrecision(pair_eta, scores, matches, options.eta_bins, &calibration));
      v["eta_calibration"] = CalibrationJson(calibration);
    }
    out["verification"][c.name] = v;
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
  std::vector<RetrievalCase> retrieval = {{"clean", &clean, &clean, &eta_clean}};
  if (data.has_corrupt) {
    retrieval.push_back({"corrupt", &clean, &corrupt, &eta_clean});
    retrieval.push_back({"corrupt_probe", &corrupt, &clean, &eta_corrupt});
  }
  for (const RetrievalCase& c : retrieval) {
    RetrievalMetrics metrics;
    HEDGEDB_RETURN_IF_ERROR(
        EvaluateRetrievalOn(similarity, *c.probes, *c.gallery, labels, &metrics));
    json r = RetrievalJson(metrics);
    if (stochastic) {
      UncertaintyCalibration calibration;
      HEDGEDB_RETURN_IF_ERROR(
          CalibrateAccuracy(*c.probe_eta, metrics.knn_correct, options.eta_bins, &calibration));
      r["eta_calibration"] = CalibrationJson(calibration);
    }
    out["retrieval"][c.name] = r;
  }

  if (spec.kind == Kind::kCodes) {
    const double mi = DimcoMutualInformation(clean, labels);
    out["dimco"]["mutual_information_nats"] = mi;
    out["dimco"]["mutual_information_bits"] = mi / std::log(2.0);
    out["dimco"]["code_bits"] = spec.code_dims * std::log2(static_cast<double>(spec.code_k));
    // The estimate treats code dimensions as independent (DIMCO eq. 6-7), so
    // redundant dimensions can push it above H(Y), the most a true I(X~; Y)
    // can be: report H(Y) beside it.
    std::map<int64_t, int64_t> counts;
    for (int64_t l : labels) ++counts[l];
    double label_entropy = 0;
    for (const auto& [label, count] : counts) {
      const double p = static_cast<double>(count) / labels.size();
      label_entropy -= p * std::log2(p);
    }
    out["dimco"]["label_entropy_bits"] = label_entropy;
    if (data.has_corrupt) {
      out["dimco"]["mutual_information_bits_corrupt"] =
          DimcoMutualInformation(corrupt, labels) / std::log(2.0);
    }
  }
  *report = std::move(out);
  return Status::OK();
}

}  // namespace encoders
}  // namespace hedgedb
