// Evaluation of trained encoders with the papers' protocols (HIB
// sections 4.3-4.4 and appendix G). Torch-free: embeddings come from
// EncoderModel and are scored with the core library's public scoring
// functions (hedgedb/score.h) as a collection of the model's embeddings
// (engine_bridge.h), i.e. with the same numbers a hedgedb search returns.
//
// Similarity per method:
//   point (soft contrastive): match probability sigmoid(-a ||z1 - z2|| + b)
//   protonet, fstat:          the same with a = 1, b = 0 (rank = -L2; these
//                             methods learn no a, b)
//   hib (gaussian, mog):      Monte Carlo match probability (HIB eq. 5)
//   spe:                      mutual likelihood score on (mu, s2 + sigma_eps^2)
//                             (EncoderModel::Embed adds sigma_eps^2):
//                             log N(mu1; mu2, s1 + s2 + 2 sigma_eps^2), the
//                             likelihood that two items share an SPE prototype
//                             (SPE learns no a, b for a match probability)
//   dimco:                    log-probability of the gallery code under the
//                             probe's table (DIMCO eq. 8)
// Uncertainty eta = 1 - p(m|x,x) (HIB eq. 9) for gaussian/mog; for SPE with
// a = 1, b = 0 since SPE has no learned match scale.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "encoders/data/encoder_data.h"
#include "encoders/embedder.h"
#include "encoders/eval/metrics.h"
#include "hedgedb/calibration.h"
#include "hedgedb/score.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace encoders {

// Where a long evaluation is: step `step` of `steps` (1-based; the steps
// planned for the options given), named `name` ("retrieval clean"), with
// `done` of `total` of its units ("queries", "pairs", "items") done. Each
// step is reported when it begins (done 0) and when it ends (done == total),
// and in between as its units complete.
struct EvaluationProgress {
  std::string name;
  const char* unit = "";
  int step = 0;
  int steps = 0;
  int64_t done = 0;
  int64_t total = 0;
};
// Called from the evaluating thread and, within a step, from the threads
// that score it (one call at a time is not guaranteed: the callee
// serialises what it prints).
using EvaluationProgressFn = std::function<void(const EvaluationProgress&)>;

struct EvaluationOptions {
  std::string split = "test";
  int64_t max_items = 2000;            // test items used (uniform subset); <= 0: all
  int64_t verification_pairs = 10000;  // HIB section 4.3
  int samples = 8;                     // Monte Carlo K per side
  int eta_bins = 20;                   // HIB section 4.4
  uint64_t seed = 0;
  // Monte Carlo repeats (HIB reports means over repeats): the metrics that
  // draw samples are computed with this many sample seeds on the same items
  // and pairs (repeat 0 uses `seed`). Ignored for point and code models.
  int mc_repeats = 1;
  // Product quantization of a point model's embeddings, "MxB" (e.g. "2x8";
  // pq_baseline.h), trained on up to 20,000 training-split items: the
  // baseline of DIMCO's codes at equal bits. Empty: none.
  std::string pq;
  // Modularity and explicitness (disentanglement.h) of point embeddings or
  // Gaussian means, the factors being the composite's items; the explicitness
  // classifiers are fitted on up to 5,000 training-split items.
  bool disentanglement = false;
  // Episodic few-shot accuracy (episodes.h) of SPE and point models; 0: none.
  int64_t episodes = 0;
  int64_t shots = 5;    // support items per class and episode
  int64_t queries = 5;  // query items per class and episode
  // Progress of the steps (optional): `hedgedb evaluate` prints it.
  EvaluationProgressFn progress;
};

// How two sets of embeddings are compared (see the file comment).
struct Similarity {
  ModelSpec spec;
  int samples = 8;
  uint64_t seed = 0;
};

// Fills rows x gallery similarities: row q holds the similarity of probe q to
// every gallery item. Errors: embeddings that do not fit the model, or that a
// collection would refuse (e.g. non-positive variances).
Status SimilarityMatrix(const Similarity& similarity, const Embeddings& probes,
                        const Embeddings& gallery, std::vector<float>* matrix);
// Similarity of probe pairs[i].first to gallery pairs[i].second.
// `advance` (optional) is called after each pair.
Status PairSimilarities(const Similarity& similarity, const Embeddings& probes,
                        const Embeddings& gallery, const std::vector<VerificationPair>& pairs,
                        std::vector<double>* scores,
                        const std::function<void()>& advance = nullptr);
// eta per item; empty for kinds without one (point, codes).
Status Uncertainties(const Similarity& similarity, const Embeddings& items,
                     std::vector<double>* eta);

// Retrieval metrics of probes against a gallery of the same items (or their
// twins: same index = same item, left out).
// `reachable_only`: for sets too small for recall@8 or KNN k = 5 (a few
// validation items during training), report only the cut-offs that
// leave-one-out can rank instead of failing. `advance` (optional) is called
// after each probe is scored, from the scoring threads.
Status EvaluateRetrievalOn(const Similarity& similarity, const Embeddings& probes,
                           const Embeddings& gallery, const std::vector<int64_t>& labels,
                           RetrievalMetrics* metrics, bool reachable_only = false,
                           const std::function<void()>& advance = nullptr);

// DIMCO's estimate of I(X~; Y) (eq. 6-7, nats) over the given labelled codes:
// sum over code dimensions of H(mean p_i) - sum_y freq(y) H(mean_y p_i).
// Dimensions are treated as independent, so it is not a mutual information:
// redundant dimensions count several times and it can exceed H(Y).
double DimcoFactorisedInformation(const Embeddings& codes, const std::vector<int64_t>& labels);

// The same estimate as DIMCO's supplement reports it: on class-balanced
// batches (`classes` classes drawn at random from those with at least
// `per_class` items, `per_class` items each), averaged over `batches`.
struct BatchInformationOptions {
  int64_t classes = 5;     // DIMCO supplement: 5 classes
  int64_t per_class = 16;  // x 16 images
  int64_t batches = 500;   // 500 batches
  uint64_t seed = 0;
};
struct BatchInformation {
  double mean_bits = 0;
  double sd_bits = 0;  // over batches
  int64_t batches = 0;
  double label_entropy_bits = 0;  // H(Y) of a batch: log2(classes)
};
// Errors: not codes; fewer than `classes` classes with `per_class` items.
Status DimcoBatchInformation(const Embeddings& codes, const std::vector<int64_t>& labels,
                             const BatchInformationOptions& options, BatchInformation* out);

// The reports of several Monte Carlo repeats merged into one: a number that
// differs between them becomes {"mean", "sd" (n - 1), "repeats"}; a number
// that is null in some repeats (undefined there) becomes the same over the
// repeats that have it ("sd" null with one), plus "missing": how many had
// none; anything else is the first report's. `runs` must not be empty.
nlohmann::json MergeRepeats(const std::vector<nlohmann::json>& runs);

// Embeds the split (clean and, where the data has one, corrupt twin) and
// computes every metric; *report gets the JSON object `hedgedb evaluate`
// prints. With `calibration`, also what calibrating a collection of the clean
// items would report (CalibrateScoreMatrix: up to 1 million leave-one-out
// pairs, before / after held out by query). With `shifted` too, where the
// data has corrupt twins: how that map does on the corrupt probes against
// the clean gallery, a shift it never saw (MeasureCalibrationScoreMatrix;
// left empty without twins).
Status EvaluateModel(const EncoderModel& model, const EncoderData& data,
                     const EvaluationOptions& options, nlohmann::json* report,
                     CalibrationReport* calibration = nullptr,
                     CalibrationQuality* shifted = nullptr);

// The JSON `hedgedb evaluate` prints for retrieval metrics (recall_at_K,
// map_at_r, r_precision, knn_accuracy, queries, queries_with_relevant) and
// for an uncertainty calibration (binning, kendall_tau, bin_performance,
// bin_mean_eta, bin_sizes, and the erc_area fields when measured; null where
// NaN). The reports' "eta_calibration" objects hold the equal-count bins and,
// under "equal_width", the same with bins of equal eta width (EtaBinning).
nlohmann::json RetrievalJson(const RetrievalMetrics& metrics);
nlohmann::json CalibrationJson(const UncertaintyCalibration& calibration);

// Retrieval metrics of embeddings the caller already has (no model): every
// query ranks the whole gallery by ScoreMatrix's exact scores (the numbers a
// search of a collection with `spec` returns), and EvaluateRetrieval turns
// the rankings into recall@k, MAP@R, R-precision and KNN accuracy. With
// retrieval.exclude_same_index, query i and gallery item i are the same item
// (leave-one-out: pass the same view twice). For gaussian and mog queries
// also the uncertainty calibration of the queries' eta (KNN accuracy per eta
// bin, Kendall's tau; HIB section 4.4) when there are at least eta_bins
// queries.
struct EmbeddingEvaluationOptions {
  ScoreOptions score;
  RetrievalOptions retrieval;
  int eta_bins = 20;
  // The score matrix is computed in blocks of queries holding at most this
  // many floats (at least one query per block), so memory stays bounded
  // whatever the number of items.
  int64_t block_floats = int64_t{1} << 24;
  // Progress (optional): the ranking of the queries, then their eta.
  EvaluationProgressFn progress;
  // Gaussian and mog: fit match_a and match_b to the gallery's labelled
  // pairs (query/match_fit.h) instead of the spec's, as calibrate does for
  // a collection whose own cannot express a match. The report gives the
  // ones used ("match_a", "match_b", "match_parameters": "fitted"/"given";
  // "match_parameters_note" says why they were kept when the gallery's
  // labels cannot be fitted, e.g. no label with two items).
  bool fit_match_parameters = false;
};
// Errors: label counts that do not match the rows, embeddings ScoreMatrix
// refuses (shape, variances, score not defined for the kind), k or bins out
// of range (EvaluateRetrieval).
Status EvaluateEmbeddings(const CollectionSpec& spec, const EmbeddingView& queries,
                          const EmbeddingView& gallery, const std::vector<int64_t>& query_labels,
                          const std::vector<int64_t>& gallery_labels,
                          const EmbeddingEvaluationOptions& options, nlohmann::json* report);

}  // namespace encoders
}  // namespace hedgedb
