// Embedding kinds, score types and the plain structs that describe
// collections, batches, records and search results.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/status.h"

namespace hedgedb {

// What one stored item is (docs/concepts.md, "Embedding kinds").
enum class Kind {
  kPoint,     // z in R^D
  kGaussian,  // mean and diagonal variance in R^D
  kMog,       // C weights, C means and C diagonal variances in R^D
  kCodes,     // DIMCO code: d symbols in {0..k-1}
};

// Exact stage-2 scores; higher is always better (docs/concepts.md, "Scores").
enum class ScoreType {
  kDefault,  // mc for gaussian/mog, match for point, logprob for codes
  kMc,       // Monte Carlo match probability (HIB eq. 5)
  kCsd,      // negative closed-form expected squared distance
  kMls,      // mutual likelihood score (PFE)
  kL2,       // negative Euclidean distance between (mixture) means
  kMatch,    // soft-contrastive match probability on (mixture) means (HIB eq. 2)
  kLogprob,  // DIMCO log-probability of the item's code under the query table
};

HEDGEDB_EXPORT const char* KindName(Kind kind);
HEDGEDB_EXPORT bool ParseKind(const std::string& name, Kind* kind);
HEDGEDB_EXPORT const char* ScoreName(ScoreType score);
HEDGEDB_EXPORT bool ParseScore(const std::string& name, ScoreType* score);
// The score a search asking for `score` uses on a collection of `kind`:
// kDefault -> match (point), mc (gaussian, mog), logprob (codes); mc on points
// is match. Other scores are returned unchanged (validity is not checked).
HEDGEDB_EXPORT ScoreType ResolveScore(Kind kind, ScoreType score);

// Everything that defines a collection. Fixed at creation.
struct CollectionSpec {
  std::string name;
  Kind kind = Kind::kGaussian;
  // D for point/gaussian/mog; d (number of code dimensions) for codes.
  int dim = 0;
  // C, the number of mixture components (mog only).
  int components = 1;
  // k, the code alphabet size (codes only), 2..256.
  int code_k = 0;
  // FAISS factory string of the coarse index; empty picks the kind's default
  // ("IVF1024,Flat" for vectors, "PQ" with identity codebooks for codes).
  // Only a bounded grammar is accepted (docs/concepts.md, "Coarse indexes").
  std::string index_factory;
  // Soft-contrastive match parameters: p = sigmoid(-a * ||z1 - z2|| + b), a > 0.
  float match_a = 1.0f;
  float match_b = 0.0f;
  // Default Monte Carlo samples per side (a multiple of C for mog) and seed.
  int samples = 8;
  uint64_t seed = 0;
  // Free UTF-8 text the application keeps with the collection, at most
  // kMaxCollectionMetadata bytes (it is stored with the collection's
  // descriptor, which every write rewrites); hedgedb never interprets it.
  // `hedgedb ingest-images` records how it read the images here (JSON), so
  // that later commands read queries the same way.
  std::string metadata;
};
constexpr size_t kMaxCollectionMetadata = 4096;

// How a batch gives its diagonal variances; all are converted to variances
// once, on input (ToVariance):
//   var       sigma^2 (what the engine stores)
//   std       sigma > 0
//   log_var   log sigma^2 (PFE's log_sigma_sq)
//   log_std   log sigma (PCME++)
enum class VarianceForm { kVar, kStd, kLogVar, kLogStd };
HEDGEDB_EXPORT const char* VarianceFormName(VarianceForm form);  // "var", "std", ...
HEDGEDB_EXPORT bool ParseVarianceForm(const std::string& name, VarianceForm* form);
// Writes the variances of `items` x `per_item` values of `form` to `out`
// (which may be `in`). InvalidArgument naming the form, item and value when
// a value is not finite, a std is not > 0, or the variance leaves float's
// range (0 or infinite): the batch is then refused, nothing half-converted
// is kept by the callers.
HEDGEDB_EXPORT Status ToVariance(VarianceForm form, const float* in, int64_t items,
                                 int64_t per_item, float* out);

// The default Monte Carlo samples per side of a collection with `components`
// mixture components: CollectionSpec().samples, rounded up to a multiple of
// the components (stratified mixture sampling needs one).
HEDGEDB_EXPORT int DefaultSamples(int components);

// A batch of embeddings as borrowed row-major float buffers. Which pointers are
// used depends on the kind; n is the number of rows.
//   point:    vec     n x D
//   gaussian: mean    n x D,      var n x D (every entry > 0)
//   mog:      mean    n x C x D,  var n x C x D, weights n x C (nullptr: uniform 1/C)
//   codes:    codes   n x d with symbols in [0, k)            (items)
//             logp    n x d x k natural-log probabilities      (queries)
struct EmbeddingView {
  int64_t n = 0;
  const float* vec = nullptr;
  const float* mean = nullptr;
  const float* var = nullptr;
  const float* weights = nullptr;
  const int32_t* codes = nullptr;
  const float* logp = nullptr;
};

// One ingest batch: written atomically (all or nothing). A batch of 0 items
// writes nothing and succeeds (the command line and Python alike).
struct IngestBatch {
  EmbeddingView data;
  // n ids, unique within the batch and new to the collection (unless
  // upsert). nullptr: ids continue after the largest id the collection has
  // ever held.
  const int64_t* ids = nullptr;
  // n labels, or nullptr for none.
  const int64_t* labels = nullptr;
  // With labels: n flags, 0 where item i has no label (labels[i] is then
  // ignored), so that one batch can mix labelled and unlabelled items;
  // nullptr: every item has its label.
  const uint8_t* has_labels = nullptr;
  // n payloads (opaque bytes, e.g. an image path or JSON), or nullptr for none.
  const std::string* payloads = nullptr;
  // Makes a retry idempotent: a batch whose token the collection has already
  // committed is not written again; Ingest returns the ids of the first write
  // (IngestResult::replayed). A token reused for a different batch is an
  // error. Empty: no token. At most 256 bytes.
  std::string token;
  // Replace the items whose ids exist (record, label and payload: an item
  // given no label or payload keeps none) and add the others, in the same
  // atomic batch: after a crash each id holds its old item or its new one,
  // never a mix and never nothing. Needs `ids`.
  bool upsert = false;
};

// What an Ingest did, beyond the ids.
struct IngestResult {
  // The token was seen before: nothing was written, the ids are the first
  // write's.
  bool replayed = false;
  // Collection sequence number of the batch (of the first write if replayed).
  uint64_t sequence = 0;
  // IngestBatch::upsert: how many of the ids existed and were replaced.
  int64_t replaced = 0;
  // Non-empty when the batch is durable but the coarse index could not take
  // it: searches of the collection then score every item exactly until the
  // index is rebuilt (on the next open). The reason, for the user.
  std::string index_warning;
};

// One stored item as returned by Get. Only the vectors of the collection's
// kind are filled.
struct Record {
  int64_t id = 0;
  bool found = false;
  bool has_label = false;
  int64_t label = 0;
  std::string payload;
  std::vector<float> vec;      // point: D
  std::vector<float> mean;     // gaussian: D; mog: C x D
  std::vector<float> var;      // gaussian: D; mog: C x D
  std::vector<float> weights;  // mog: C
  std::vector<int32_t> codes;  // codes: d
};

// Which items a search may return (SearchOptions::filter). The conditions
// are ANDed; the default filter lets every item through. A filtered search
// returns the best k items that pass (exactly those that pass, when fewer
// than k do): the filter is applied inside stage 1, not after it
// (docs/concepts.md, "Filtered search").
struct SearchFilter {
  enum class LabelRule {
    kAny,    // no condition on the label
    kIn,     // the item has a label and it is one of `labels` ({x}: equals x)
    kNotIn,  // the item has no label, or a label that is not in `labels`
  };
  LabelRule label_rule = LabelRule::kAny;
  std::vector<int64_t> labels;  // at least one with kIn / kNotIn
  // (field, value): the item's payload, read as a JSON object, has the
  // top-level field `field` equal to `value`, a JSON scalar written as JSON
  // text: "\"red\"", "3", "2.5", "true", "null". Numbers compare by value
  // (3 equals 3.0); strings exactly (no case folding). A payload that is not
  // a JSON object, lacks the field or holds an array or object there does
  // not pass.
  std::vector<std::pair<std::string, std::string>> payload_equals;

  bool empty() const { return label_rule == LabelRule::kAny && payload_equals.empty(); }
};

// The largest HNSW efSearch a search takes (SearchOptions::ef_search), and
// the widest a filtered or threshold search widens stage 1 to by itself.
constexpr int kMaxEfSearch = 1 << 14;

struct SearchOptions {
  // Number of results per query.
  int k = 10;
  ScoreType score = ScoreType::kDefault;
  // Stage-1 candidate count; 0 means k * oversampling.
  int64_t candidates = 0;
  int oversampling = 10;
  // Skip stage 1 and score every item exactly (the ground truth).
  bool exhaustive = false;
  // Monte Carlo samples per side; 0 uses the collection's default.
  int samples = 0;
  // mc only: start at `samples` and double K (up to max_samples) for the
  // candidates whose 95% interval (score +- 1.96 standard errors) straddles
  // the boundary between rank k and k + 1, until none does. Results carry
  // the K their score was computed with (SearchHit::samples).
  bool adaptive_samples = false;
  int max_samples = 64;
  // Seed of the Monte Carlo samples; used when has_seed, else the collection's.
  bool has_seed = false;
  uint64_t seed = 0;
  // FAISS knobs; 0 keeps the index's own setting. ef_search is at most
  // kMaxEfSearch (a larger one is refused: FAISS allocates per unit of it).
  int nprobe = 0;
  int ef_search = 0;
  // Compute eta for every result and the query (costs 2 extra sample sets
  // each) and, for mc, each result's standard error.
  bool with_uncertainty = true;
  // Fill SearchHit::payload (one record-store read per result).
  bool with_payload = false;
  // Threshold search: with min_prob > 0 (at most 1), return every item whose
  // calibrated probability is at least min_prob, best first, at most
  // max_results per query, instead of the top k (k is ignored). Needs a
  // calibration of the score (DB::Calibrate). Stage 1 widens (candidates,
  // nprobe, efSearch doubling) until the worse half of its candidates holds no
  // qualifying item (docs/calibration.md, "Threshold search").
  double min_prob = 0;
  int64_t max_results = 1000;
  // Conformal match sets: with coverage in (0, 1), return the items whose
  // calibrated probability is at least the map's split-conformal threshold
  // for that coverage (a threshold search, at most max_results), so that a
  // query's set holds a same-label item with probability >= coverage over
  // queries exchangeable with the conformal ones. Needs a calibration fitted
  // with a conformal fraction (CalibrateOptions::conformal_fraction);
  // excludes min_prob (docs/calibration.md, "Conformal match sets").
  double coverage = 0;
  // With coverage: the threshold of the query's quartile of eta among the
  // conformal queries (group-conditional, Mondrian), so that coverage holds
  // within each quartile, not only on average (gaussian and mog).
  bool coverage_by_eta = false;
  // Risk-controlled threshold: with max_false_match_rate in (0, 1), return
  // the items whose calibrated probability is at least the smallest
  // threshold whose false-match rate (the share of non-matching pairs that
  // clear it) is at most max_false_match_rate with `confidence`, bounded
  // (Clopper-Pearson) over the held-out queries' non-matching pairs (a
  // threshold search, at most max_results). Needs a calibration fitted with
  // a conformal fraction; excludes min_prob and coverage
  // (docs/calibration.md, "False-match rate").
  double max_false_match_rate = 0;
  double confidence = 0.95;
  // Only items that pass this filter are returned (top-k and threshold
  // search alike).
  SearchFilter filter;
};

struct SearchHit {
  int64_t id = 0;
  float score = 0;
  // eta = 1 - p(m | x, x) of the item; NaN where the kind has none.
  float uncertainty = std::numeric_limits<float>::quiet_NaN();
  // Calibrated P(the item shares the query's label) from the collection's
  // calibration of this score (monotone in score); NaN where the collection
  // has no calibration for the score.
  float prob = std::numeric_limits<float>::quiet_NaN();
  // mc: standard error of score from its K x K Monte Carlo pair terms, and K
  // (with SearchOptions::with_uncertainty or adaptive_samples); NaN and 0
  // otherwise.
  float std_error = std::numeric_limits<float>::quiet_NaN();
  int samples = 0;
  bool has_label = false;
  int64_t label = 0;
  std::string payload;  // with SearchOptions::with_payload
};

struct SearchResult {
  // eta of the query (codes: the mean entropy of its table over the d
  // positions, in units of ln k); NaN for points.
  float query_uncertainty = std::numeric_limits<float>::quiet_NaN();
  std::vector<SearchHit> hits;  // best first
  // Items scored exactly for this query (stage-2 cost).
  int64_t scored = 0;
  // Threshold search: more items qualified than max_results.
  bool truncated = false;
  // With a filter: how many live items pass it (-1: no filter). Fewer than
  // k means the hits are exactly those items.
  int64_t passing = -1;
};

// A calibration stored for one score of a collection (DB::Calibrate).
struct CalibrationInfo {
  ScoreType score = ScoreType::kMc;  // resolved
  std::string method;                // "platt", "beta", "isotonic" or "conditional"
  int64_t pairs = 0;                 // labelled pairs it was fitted on
  double fit_base_rate = 0;          // their positive rate
  double base_rate = 0;              // the rate it is calibrated for
  int samples = 0;                   // Monte Carlo samples of the pair scores (0: not MC)
  uint64_t sequence = 0;             // collection sequence when fitted
  std::string reason;                // why this method won
  // A conditional map reads the result's context (rank, gap to the next
  // score, eta: docs/calibration.md); conditioned_on lists its features.
  // Maps stored before version 2 are unconditional.
  bool conditional = false;
  std::string conditioned_on;
  // Labelled queries held out of the fit whose scores give conformal match
  // sets (SearchOptions::coverage); 0: none. Their non-matching pairs bound
  // the false-match rate of SearchOptions::max_false_match_rate.
  int64_t conformal_queries = 0;
  int64_t held_out_non_matches = 0;
};

struct CollectionStats {
  CollectionSpec spec;
  int64_t items = 0;            // live items
  int64_t max_id = -1;          // largest id ever held (-1: none)
  uint64_t sequence = 0;        // sequence number of the last write
  uint64_t index_sequence = 0;  // sequence number the coarse index covers
  int64_t index_vectors = 0;    // vectors in the coarse index (incl. tombstones)
  // The index is trained once enough items arrived, at the first search or
  // flush after that (ingest never waits for it); until then searches are
  // exhaustive.
  bool index_trained = false;
  // The index failed to take a write (index_note says why): searches score
  // every item exactly, the index is never saved as covering the write, and
  // the next open rebuilds it.
  bool index_stale = false;
  // What happened to the index on open or since: "" (loaded and current), or
  // e.g. "rebuilt from the records: index file ... fails its checksum".
  std::string index_note;
  // Non-empty if the collection lost acknowledged writes: on open its index
  // file covered a sequence number past the store's (the store's write-ahead
  // log was damaged or deleted). Names both numbers; the index was rebuilt
  // from the records that remain.
  std::string lost_writes;
  std::string index_description;  // factory string in use
  // Where the rows that stage 2 scores came from when the collection opened:
  // "snapshot" (its arena snapshot file, memory-mapped, so the operating
  // system pages those rows in and out) or "records" (decoded from the
  // record store; the snapshot is then written for the next open).
  std::string arena_source;
  // Why an arena snapshot that exists was not used (stale, damaged), or why
  // it could not be saved; "" when neither happened.
  std::string arena_note;
  // Bytes of rows mapped from the snapshot file (the rest of the rows are in
  // the process's memory).
  int64_t arena_mapped_bytes = 0;
  // The default stage-1 settings (0: not an IVF / HNSW index), fitted to the
  // data when the index is trained: the smallest nprobe or efSearch, doubling
  // from 8 (or nlist / 64) and 64, at which stage 1 finds at least 95% of the
  // exact coarse top-100 for 100 of the collection's own items as queries.
  int index_nprobe = 0;
  int index_ef_search = 0;
  // The fraction measured at those settings; NaN if never measured (codes,
  // Flat, or an untrained index).
  double index_recall_estimate = std::numeric_limits<double>::quiet_NaN();
  // Calibrations stored for the collection's scores (DB::Calibrate), and a
  // note when one is damaged (it is then not used).
  std::vector<CalibrationInfo> calibrations;
  std::string calibration_note;
};

}  // namespace hedgedb
