// Exact stage-2 scorers (docs/concepts.md, "Scores"). Internal to the core library.
//
// Items live in the collection's arena as fixed-stride rows:
//   point:    float [z (D)]
//   gaussian: float [mu (D), var (D)]
//   mog:      float [w (C), mu (C*D), var (C*D)]
//   codes:    uint8 [c (d)]
// Queries use the same float row layout, except codes queries, which are
// d x k log-probability tables (float).
// With a compact row format (RowShape::format float16 or bfloat16) the item
// rows hold 2-byte values (common/row_layout.h); the functions below take
// such rows when the shape says so and score their exact float32 widening
// (scorer.cc, CompactRowsQuery), so the numbers are those of a float32 row
// of the rounded values, bitwise. Query rows are float32 always.
//
// Monte Carlo samples come from a fixed bank of standard normals per
// (seed, stream): every item draws z_j = mu + sqrt(var) * eps_j with the same
// bank (common random numbers), so scores are deterministic for a seed and
// independent of which other items are in the collection or the candidate set.
//
// The bank of (seed, stream) is the sequence of standard normals from
// xoshiro256** seeded through splitmix64 with (seed, stream), turned into
// normals by Box-Muller in double precision (kernels.h: GenerateNormalBank);
// it does not depend on the C++ library's distributions. Row i of a K x D bank
// (numbers i*D .. i*D+D-1) is sample i. Streams:
//   kQuerySampleStream  the query's K samples,
//   kItemSampleStream   every item's K samples,
//   kEtaFirstStream, kEtaSecondStream  the two independent sample sets of eta.
// Mixtures are sampled stratified: samples [c*K/C, (c+1)*K/C) come from
// component c, and a pair of samples from components (c, c') weighs
// pi_c * pi'_c' / (K/C)^2, so unequal weights are respected.
// Scores are bitwise reproducible for a seed on a given kernel ISA path
// (kernels.h); different paths (AVX-512, AVX2, portable) agree to rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/row_layout.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace query {

// Shape of a collection's rows (common/row_layout.h).
using RowShape = ::hedgedb::RowShape;

// Sample streams of the Monte Carlo scores and eta (see above).
constexpr uint64_t kQuerySampleStream = 1;
constexpr uint64_t kItemSampleStream = 2;
constexpr uint64_t kEtaFirstStream = 3;
constexpr uint64_t kEtaSecondStream = 4;
// Upper bound on samples per side.
constexpr int kMaxSamples = 4096;

struct ScoreParams {
  ScoreType score = ScoreType::kDefault;  // resolved by the scorer
  float match_a = 1.0f;
  float match_b = 0.0f;
  int samples = 8;  // K per side (mog: multiple of C)
  uint64_t seed = 0;
};

// Checks the shape, that `score` applies to the kind (after ResolveScore),
// 1 <= samples <= kMaxSamples (mog: a multiple of C), and match_a > 0.
Status ValidateScoreParams(const RowShape& shape, const ScoreParams& params);
// The params a collection of `spec` scores with: `score` resolved for the
// kind, the spec's match a and b, `samples` (0: the spec's) and `seed` (the
// spec's unless has_seed); then validated.
Status ScoreParamsFor(const CollectionSpec& spec, ScoreType score, int samples, bool has_seed,
                      uint64_t seed, ScoreParams* params);
// (ResolveScore is public: hedgedb/types.h.)

// Per-query prepared state (e.g. the query's samples); thread-compatible.
class PreparedQuery {
 public:
  virtual ~PreparedQuery() = default;
  // Scores n item rows: row i starts at base + rows[i] * row_stride_bytes.
  // out has n entries.
  virtual void ScoreRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                         float* out) const = 0;
  // Standard error of each row's score as ScoreRows computes it: for mc, the
  // two-sample U-statistic estimate over the K x K pair terms
  // (calibration/mc_error.h; mixtures: terms weighted as in the score, the
  // stratification ignored, which errs on the large side). NaN for scores
  // that are not Monte Carlo.
  virtual void StdErrorRows(const void* base, size_t row_stride_bytes, const int64_t* rows,
                            size_t n, float* out) const;
  // Keys that order rows whose float scores tie although the exact quantity
  // differs: `match` is a sigmoid of the distance, and near 0 or 1 many
  // distances round to one float. A larger key ranks first among equal
  // scores. Returns false (out untouched) for scores that need none; n = 0
  // asks only that.
  virtual bool TieBreakKeys(const void* base, size_t row_stride_bytes, const int64_t* rows,
                            size_t n, double* out) const;
  // The `top` best of the n rows by ScoreRows' score, best first, in
  // *best_rows, when the score has a scan faster than scoring every row and
  // sorting (DIMCO: a quantized pre-scan, query/code_topk.h); exact: the
  // same rows a full ScoreRows would rank first. rows null: the rows 0..n-1
  // (no row ids to read). Returns false (untouched) otherwise.
  virtual bool TopRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                       size_t top, std::vector<int64_t>* best_rows) const;
};

// Scores the same n rows for nq queries prepared by PrepareQuery with one
// shape and one set of params (a search plan): out[j * out_stride + r] is what
// queries[j]->ScoreRows would write at r, bitwise (rows of out are
// out_stride floats apart). mc and the closed-form
// scores of point and gaussian rows read each row once for all the queries
// (kernels.h: McScoreRowsShared, MomentSumRowsShared), which is what a batch
// over many rows (an exhaustive search) needs; the others score one query
// at a time.
void ScoreRowsShared(const PreparedQuery* const* queries, size_t nq, const void* base,
                     size_t row_stride_bytes, const int64_t* rows, size_t n, float* out,
                     size_t out_stride);

// Prepares `query_row` (query_row_size() floats) for scoring. Validates the
// params; the rows are trusted: callers check them first with
// query/row_checks.h (the collection and hedgedb/score.h), the one place of
// those rules.
Status PrepareQuery(const RowShape& shape, const ScoreParams& params, const float* query_row,
                    std::unique_ptr<PreparedQuery>* out);

// The closed-form scores (csd, mls, l2, match; the score resolved for the
// kind) of n rows as plain double loops over the dimensions, std::log per
// dimension for mls: the scalar reference of the float32 SIMD path that
// PrepareQuery's ScoreRows takes (kernels.h, MomentSumRows), for tests and
// benchmarks. InvalidArgument for params PrepareQuery refuses and for mc and
// logprob.
Status ScalarMomentScoreRows(const RowShape& shape, const ScoreParams& params,
                             const float* query_row, const void* base, size_t row_stride_bytes,
                             const int64_t* rows, size_t n, float* out);

// eta = 1 - p(m | x, x) (HIB eq. 9) of one item row (gaussian/mog), from two
// independent sample sets (streams kEtaFirstStream, kEtaSecondStream, K per
// side, stratified for mog); NaN for kinds without one. The params must have
// passed ValidateScoreParams.
// Depends on samples, match_a, match_b and seed, not on the score type.
float Uncertainty(const RowShape& shape, const ScoreParams& params, const float* row);

// The uncertainty of a query row, which a search reports as
// query_uncertainty and a conditional calibration map reads as eta_q:
// Uncertainty() for gaussian/mog; for codes, whose query is a d x k table of
// log-probabilities, the mean over the d positions of the table's entropy
// in units of ln k (each position's row normalized first): 0 when every
// position names one symbol, 1 when every position is uniform. A DIMCO
// query that cannot tell which code it is hedges exactly there. NaN for
// points.
float QueryUncertainty(const RowShape& shape, const ScoreParams& params, const float* query_row);

// Uncertainty() of n rows, row r at base + rows[r] * row_stride_bytes; the
// same numbers, bitwise. Gaussian rows share SIMD lanes, so a batch (e.g. all
// hits of a query) costs about as much as one row.
void UncertaintyRows(const RowShape& shape, const ScoreParams& params, const void* base,
                     size_t row_stride_bytes, const int64_t* rows, size_t n, float* out);

}  // namespace query
}  // namespace hedgedb
