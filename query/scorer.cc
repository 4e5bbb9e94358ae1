#include "query/scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "calibration/mc_error.h"
#include "query/code_topk.h"
#include "query/kernels.h"
#include "query/row_checks.h"

namespace hedgedb {
namespace query {

Status ScoreParamsFor(const CollectionSpec& spec, ScoreType score, int samples, bool has_seed,
                      uint64_t seed, ScoreParams* params) {
  if (samples < 0) {
    return Status::InvalidArgument("samples must be >= 0 (0: the collection's), got " +
                                   std::to_string(samples));
  }
  params->score = ResolveScore(spec.kind, score);
  params->match_a = spec.match_a;
  params->match_b = spec.match_b;
  params->samples = samples > 0 ? samples : spec.samples;
  params->seed = has_seed ? seed : spec.seed;
  return ValidateScoreParams(RowShapeOf(spec), *params);
}

bool PreparedQuery::TieBreakKeys(const void*, size_t, const int64_t*, size_t, double*) const {
  return false;
}

bool PreparedQuery::TopRows(const void*, size_t, const int64_t*, size_t, size_t,
                            std::vector<int64_t>*) const {
  return false;
}

void PreparedQuery::StdErrorRows(const void*, size_t, const int64_t*, size_t n, float* out) const {
  std::fill(out, out + n, std::numeric_limits<float>::quiet_NaN());
}

namespace {

bool ScoreApplies(Kind kind, ScoreType resolved) {
  switch (kind) {
    case Kind::kPoint:
      return resolved == ScoreType::kMatch || resolved == ScoreType::kL2;
    case Kind::kGaussian:
    case Kind::kMog:
      return resolved == ScoreType::kMc || resolved == ScoreType::kCsd ||
             resolved == ScoreType::kMls || resolved == ScoreType::kL2 ||
             resolved == ScoreType::kMatch;
    case Kind::kCodes:
      return resolved == ScoreType::kLogprob;
  }
  return false;
}

int Components(const RowShape& shape) { return int(shape.mixture_components()); }

float Sigmoid(float logit) { return 1.0f / (1.0f + std::exp(-logit)); }

// Row layout offsets (in floats) of the vector kinds.
struct Layout {
  int weight_offset = -1;  // mog only
  int mean_offset = 0;
  int var_offset = 0;  // gaussian/mog
};

Layout LayoutOf(const RowShape& shape) {
  Layout layout;
  if (shape.kind == Kind::kMog) layout.weight_offset = int(shape.weights_offset());
  layout.mean_offset = int(shape.mean_offset());
  layout.var_offset = int(shape.var_offset());
  return layout;
}

// ---------------------------------------------------------------------------
// mc (gaussian, mog).
class McPreparedQuery : public PreparedQuery {
 public:
  // Samples the query row with bank `query_stream`; items use `item_stream`.
  McPreparedQuery(const RowShape& shape, const ScoreParams& params, const float* query_row,
                  uint64_t query_stream, uint64_t item_stream) {
    const int dim = shape.dim;
    const int components = Components(shape);
    const int samples = params.samples;
    const int per_component = samples / components;
    const size_t bank_size = static_cast<size_t>(samples) * dim;
    item_eps_ = CachedNormalBank(params.seed, item_stream, bank_size);
    const std::vector<float>& query_eps = CachedNormalBank(params.seed, query_stream, bank_size);
    const Layout layout = LayoutOf(shape);
    query_samples_.resize(bank_size);
    query_weights_.resize(samples);
    for (int i = 0; i < samples; ++i) {
      const int c = i / per_component;
      const float* mean = query_row + layout.mean_offset + c * dim;
      const float* var = query_row + layout.var_offset + c * dim;
      for (int d = 0; d < dim; ++d) {
        query_samples_[static_cast<size_t>(i) * dim + d] =
            mean[d] + std::sqrt(var[d]) * query_eps[static_cast<size_t>(i) * dim + d];
      }
      const float weight = layout.weight_offset < 0 ? 1.0f : query_row[layout.weight_offset + c];
      query_weights_[i] = weight / static_cast<float>(per_component);
    }
    kernel_.dim = dim;
    kernel_.components = components;
    kernel_.samples = samples;
    kernel_.query_samples = query_samples_.data();
    kernel_.query_weights = query_weights_.data();
    kernel_.item_eps = item_eps_.data();
    kernel_.match_a = params.match_a;
    kernel_.match_b = params.match_b;
    kernel_.weight_offset = layout.weight_offset;
    kernel_.mean_offset = layout.mean_offset;
    kernel_.var_offset = layout.var_offset;
  }

  void ScoreRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                 float* out) const override {
    McScoreRows(kernel_, base, row_stride_bytes, rows, n, out);
  }
  const McKernelQuery& kernel() const { return kernel_; }

  // Plain loops: only the few results of a search need it.
  void StdErrorRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                    float* out) const override {
    const int K = kernel_.samples, D = kernel_.dim, C = kernel_.components;
    const int per_component = K / C;
    std::vector<float> item_samples(static_cast<size_t>(K) * D), item_weights(K);
    std::vector<double> terms(static_cast<size_t>(K) * K);
    for (size_t r = 0; r < n; ++r) {
      const float* row = reinterpret_cast<const float*>(static_cast<const uint8_t*>(base) +
                                                        rows[r] * row_stride_bytes);
      for (int j = 0; j < K; ++j) {
        const int c = j / per_component;
        const float* mean = row + kernel_.mean_offset + c * D;
        const float* var = row + kernel_.var_offset + c * D;
        for (int d = 0; d < D; ++d) {
          item_samples[size_t(j) * D + d] =
              mean[d] + std::sqrt(var[d]) * item_eps_[size_t(j) * D + d];
        }
        const float weight = kernel_.weight_offset < 0 ? 1.0f : row[kernel_.weight_offset + c];
        item_weights[j] = weight / static_cast<float>(per_component);
      }
      for (int i = 0; i < K; ++i) {
        for (int j = 0; j < K; ++j) {
          double d2 = 0;
          for (int d = 0; d < D; ++d) {
            const double delta =
                double(query_samples_[size_t(i) * D + d]) - double(item_samples[size_t(j) * D + d]);
            d2 += delta * delta;
          }
          const double p =
              1.0 / (1.0 + std::exp(double(kernel_.match_a) * std::sqrt(d2) - kernel_.match_b));
          // Scaled so that the terms' plain mean is the weighted score.
          terms[size_t(i) * K + j] =
              double(K) * K * double(query_weights_[i]) * double(item_weights[j]) * p;
        }
      }
      calibration::McEstimate estimate;
      out[r] = calibration::EstimateMcError(terms.data(), K, K, &estimate).ok()
                   ? float(estimate.std_error)
                   : std::numeric_limits<float>::quiet_NaN();
    }
  }

 private:
  std::vector<float> query_samples_;
  std::vector<float> query_weights_;
  std::vector<float> item_eps_;
  McKernelQuery kernel_;
};

// ---------------------------------------------------------------------------
// Closed forms on (mixture) moments: csd, mls, l2, match.

// The scalar reference: one plain double loop per row and dimension, with
// std::log per dimension for mls (ScalarMomentScoreRows). The search path
// uses it only for match's tie-break keys.
class ScalarMomentScorer {
 public:
  ScalarMomentScorer(const RowShape& shape, ScoreType score, float match_a, float match_b,
                     const float* query_row)
      : shape_(shape), score_(score), match_a_(match_a), match_b_(match_b) {
    const int dim = shape.dim;
    mean_.resize(dim);
    var_.resize(dim, 0.0);
    if (shape.kind == Kind::kPoint) {
      for (int d = 0; d < dim; ++d) mean_[d] = query_row[d];
    } else {
      RowMoments(shape, query_row, mean_.data(), var_.data());
    }
    for (int d = 0; d < dim; ++d) trace_ += var_[d];
  }

  void ScoreRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                 float* out) const {
    const int dim = shape_.dim;
    std::vector<double> mean(dim), var(dim, 0.0);
    for (size_t r = 0; r < n; ++r) {
      LoadMoments(base, row_stride_bytes, rows[r], mean.data(), var.data());
      double sq = 0.0;
      switch (score_) {
        case ScoreType::kCsd: {
          double trace = 0.0;
          for (int d = 0; d < dim; ++d) {
            const double delta = mean_[d] - mean[d];
            sq += delta * delta;
            trace += var[d];
          }
          out[r] = static_cast<float>(-(sq + trace_ + trace));
          break;
        }
        case ScoreType::kMls: {
          double sum = 0.0;
          for (int d = 0; d < dim; ++d) {
            const double delta = mean_[d] - mean[d];
            const double s = var_[d] + var[d];
            sum += delta * delta / s + std::log(s);
          }
          out[r] = static_cast<float>(-0.5 * sum - MlsConstant(dim));
          break;
        }
        default: {  // l2, match
          const float dist = static_cast<float>(std::sqrt(SquaredDistance(mean.data())));
          out[r] = score_ == ScoreType::kL2 ? -dist : Sigmoid(-match_a_ * dist + match_b_);
          break;
        }
      }
    }
  }

  // The exact mean distance as a key (a larger key is closer), in double.
  void TieBreakKeys(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                    double* out) const {
    const int dim = shape_.dim;
    std::vector<double> mean(dim), var(dim, 0.0);
    for (size_t r = 0; r < n; ++r) {
      LoadMoments(base, row_stride_bytes, rows[r], mean.data(), var.data());
      out[r] = -SquaredDistance(mean.data());
    }
  }

  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& var() const { return var_; }
  double trace() const { return trace_; }
  // mls's constant: D/2 ln(2 pi).
  static double MlsConstant(int dim) { return 0.5 * dim * std::log(2.0 * 3.14159265358979323846); }

 private:
  // The moments of row `row` (points: the vector, variance 0), in double.
  void LoadMoments(const void* base, size_t row_stride_bytes, int64_t row, double* mean,
                   double* var) const {
    const float* f =
        reinterpret_cast<const float*>(static_cast<const char*>(base) + row * row_stride_bytes);
    if (shape_.kind == Kind::kPoint) {
      for (int d = 0; d < shape_.dim; ++d) mean[d] = f[d];
    } else {
      RowMoments(shape_, f, mean, var);
    }
  }
  // ||query mean - mean||^2, the distance l2 and match use.
  double SquaredDistance(const double* mean) const {
    double sq = 0.0;
    for (int d = 0; d < shape_.dim; ++d) {
      const double delta = mean_[d] - mean[d];
      sq += delta * delta;
    }
    return sq;
  }

  RowShape shape_;
  ScoreType score_;
  float match_a_;
  float match_b_;
  std::vector<double> mean_;
  std::vector<double> var_;
  double trace_ = 0.0;
};

// The search path: MomentSumRows (kernels.h) in float32, lanes over
// dimensions, on the rows themselves (point, gaussian) or on their first two
// moments (mog: RowMoments into a float scratch, kMogChunk rows at a time).
class MomentPreparedQuery : public PreparedQuery {
 public:
  MomentPreparedQuery(const RowShape& shape, const ScoreParams& params, ScoreType score,
                      const float* query_row)
      : shape_(shape),
        score_(score),
        match_a_(params.match_a),
        match_b_(params.match_b),
        reference_(shape, score, params.match_a, params.match_b, query_row) {
    const int dim = shape.dim;
    const size_t padded = (size_t(dim) + kMomentQueryPad - 1) / kMomentQueryPad * kMomentQueryPad;
    mean_.assign(padded, 0.0f);
    var_.assign(padded, 1.0f);
    for (int d = 0; d < dim; ++d) {
      mean_[d] = float(reference_.mean()[d]);
      var_[d] = float(reference_.var()[d]);
    }
    kernel_.sum = score == ScoreType::kCsd   ? MomentKernelQuery::Sum::kCsd
                  : score == ScoreType::kMls ? MomentKernelQuery::Sum::kMls
                                             : MomentKernelQuery::Sum::kSquaredDistance;
    kernel_.dim = dim;
    kernel_.mean = mean_.data();
    kernel_.var = var_.data();
    // Mixtures are scored on their moments, which the scratch holds in the
    // gaussian layout.
    const RowShape moments{Kind::kGaussian, dim, 1, 0};
    const RowShape& layout = shape.kind == Kind::kMog ? moments : shape;
    kernel_.mean_offset = int(layout.mean_offset());
    kernel_.var_offset = int(layout.var_offset());
    trace_ = float(reference_.trace());
    mls_constant_ = float(ScalarMomentScorer::MlsConstant(dim));
  }

  // Rows whose sums MomentSumRows reads in place (not mixtures' moments).
  bool sums_rows_in_place() const { return shape_.kind != Kind::kMog; }
  const MomentKernelQuery& kernel() const { return kernel_; }

  void ScoreRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                 float* out) const override {
    if (sums_rows_in_place()) {
      MomentSumRows(kernel_, base, row_stride_bytes, rows, n, out);
    } else {
      const size_t dim = size_t(shape_.dim);
      std::vector<double> mean(dim), var(dim);
      std::vector<float> scratch(kMogChunk * 2 * dim);
      std::vector<int64_t> scratch_rows(kMogChunk);
      for (size_t i = 0; i < kMogChunk; ++i) scratch_rows[i] = int64_t(i);
      for (size_t first = 0; first < n; first += kMogChunk) {
        const size_t m = std::min(kMogChunk, n - first);
        for (size_t i = 0; i < m; ++i) {
          const float* row = reinterpret_cast<const float*>(static_cast<const char*>(base) +
                                                            rows[first + i] * row_stride_bytes);
          RowMoments(shape_, row, mean.data(), var.data());
          float* to = scratch.data() + i * 2 * dim;
          for (size_t d = 0; d < dim; ++d) {
            to[d] = float(mean[d]);
            to[dim + d] = float(var[d]);
          }
        }
        MomentSumRows(kernel_, scratch.data(), 2 * dim * sizeof(float), scratch_rows.data(), m,
                      out + first);
      }
    }
    ScoresFromSums(out, n);
  }

  // The sums of MomentSumRows -> the scores, in place.
  void ScoresFromSums(float* out, size_t n) const {
    for (size_t r = 0; r < n; ++r) {
      switch (score_) {
        case ScoreType::kCsd:
          out[r] = -(out[r] + trace_);
          break;
        case ScoreType::kMls:
          out[r] = -0.5f * out[r] - mls_constant_;
          break;
        case ScoreType::kL2:
          out[r] = -std::sqrt(out[r]);
          break;
        default:  // match
          out[r] = Sigmoid(-match_a_ * std::sqrt(out[r]) + match_b_);
          break;
      }
    }
  }

  // match: the exact distance in double (a larger key is closer).
  bool TieBreakKeys(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                    double* out) const override {
    if (score_ != ScoreType::kMatch) return false;
    reference_.TieBreakKeys(base, row_stride_bytes, rows, n, out);
    return true;
  }

 private:
  static constexpr size_t kMogChunk = 64;

  RowShape shape_;
  ScoreType score_;
  float match_a_;
  float match_b_;
  ScalarMomentScorer reference_;
  std::vector<float> mean_;  // padded (kernels.h, MomentKernelQuery)
  std::vector<float> var_;
  MomentKernelQuery kernel_;
  float trace_ = 0.0f;
  float mls_constant_ = 0.0f;
};

// ---------------------------------------------------------------------------
// logprob (codes).
class CodesPreparedQuery : public PreparedQuery {
 public:
  CodesPreparedQuery(const RowShape& shape, const float* table)
      : dim_(shape.dim), k_(shape.code_k), table_(table, table + shape.query_row_size()) {}

  void ScoreRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                 float* out) const override {
    CodeScanRows(table_.data(), dim_, k_, static_cast<const uint8_t*>(base), row_stride_bytes, rows,
                 n, out);
  }

  bool TopRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n, size_t top,
               std::vector<int64_t>* best_rows) const override {
    std::vector<CodeHit> hits;
    CodeTopK(table_.data(), dim_, k_, static_cast<const uint8_t*>(base), row_stride_bytes, rows, n,
             top, &hits);
    best_rows->resize(hits.size());
    for (size_t i = 0; i < hits.size(); ++i) (*best_rows)[i] = hits[i].row;
    return true;
  }

 private:
  int dim_;
  int k_;
  std::vector<float> table_;
};

// ---------------------------------------------------------------------------
// Compact rows (RowFormat float16, bfloat16): the float scorers above read
// float rows, so the rows a call names are widened first, a tile at a time,
// into a buffer of this thread (about 64 KiB, so that a tile stays in L2
// while the float kernel reads it), and the float scorer reads the tile.
// Widening is exact, so a compact collection's scores are the float32
// scores of its rounded rows, bitwise.

// (One row at least: a mixture row of large C x D is megabytes.)
size_t WidenTileRows(const RowShape& shape) {
  return std::max<size_t>(1, (size_t(64) << 10) / (shape.item_row_size() * sizeof(float)));
}

// The widened tile's buffer of this thread (one for every caller: a float
// scorer never widens, so a tile is never widened while another is read).
std::vector<float>& WidenBuffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

// 0, 1, ..., n - 1: the row indices of a widened tile.
const int64_t* TileRowIndices(size_t n) {
  thread_local std::vector<int64_t> indices;
  if (indices.size() < n) {
    const size_t from = indices.size();
    indices.resize(n);
    for (size_t i = from; i < n; ++i) indices[i] = int64_t(i);
  }
  return indices.data();
}

// Calls fn(tile, tile_row_bytes, first, count) for consecutive tiles of the
// n rows (rows null: rows 0..n-1), `tile` their float rows back to back.
template <typename Fn>
void ForWidenedTiles(const RowShape& shape, const void* base, size_t row_stride_bytes,
                     const int64_t* rows, size_t n, Fn&& fn) {
  const size_t tile_rows = std::min(n, WidenTileRows(shape));
  const size_t floats = shape.item_row_size();
  std::vector<float>& tile = WidenBuffer();
  if (tile.size() < tile_rows * floats) tile.resize(tile_rows * floats);
  std::vector<int64_t> first_rows;  // rows null: the tile's row numbers
  for (size_t first = 0; first < n; first += tile_rows) {
    const size_t count = std::min(tile_rows, n - first);
    const int64_t* tile_of_rows = rows ? rows + first : nullptr;
    if (!rows) {
      first_rows.resize(count);
      for (size_t i = 0; i < count; ++i) first_rows[i] = int64_t(first + i);
      tile_of_rows = first_rows.data();
    }
    WidenRows(shape, base, row_stride_bytes, tile_of_rows, count, tile.data());
    fn(static_cast<const void*>(tile.data()), floats * sizeof(float), first, count);
  }
}

class CompactRowsQuery : public PreparedQuery {
 public:
  CompactRowsQuery(const RowShape& shape, std::unique_ptr<PreparedQuery> inner)
      : shape_(shape), inner_(std::move(inner)) {}

  void ScoreRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                 float* out) const override {
    ForWidenedTiles(shape_, base, row_stride_bytes, rows, n,
                    [&](const void* tile, size_t tile_bytes, size_t first, size_t count) {
                      inner_->ScoreRows(tile, tile_bytes, TileRowIndices(count), count,
                                        out + first);
                    });
  }
  void StdErrorRows(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                    float* out) const override {
    ForWidenedTiles(shape_, base, row_stride_bytes, rows, n,
                    [&](const void* tile, size_t tile_bytes, size_t first, size_t count) {
                      inner_->StdErrorRows(tile, tile_bytes, TileRowIndices(count), count,
                                           out + first);
                    });
  }
  bool TieBreakKeys(const void* base, size_t row_stride_bytes, const int64_t* rows, size_t n,
                    double* out) const override {
    if (!inner_->TieBreakKeys(nullptr, 0, nullptr, 0, nullptr)) return false;
    ForWidenedTiles(shape_, base, row_stride_bytes, rows, n,
                    [&](const void* tile, size_t tile_bytes, size_t first, size_t count) {
                      inner_->TieBreakKeys(tile, tile_bytes, TileRowIndices(count), count,
                                           out + first);
                    });
    return true;
  }
  // (TopRows: only codes have one, and codes rows are never compact.)

  const RowShape& shape() const { return shape_; }
  const PreparedQuery* inner() const { return inner_.get(); }

 private:
  RowShape shape_;  // of the stored rows
  std::unique_ptr<PreparedQuery> inner_;
};

}  // namespace

void ScoreRowsShared(const PreparedQuery* const* queries, size_t nq, const void* base,
                     size_t row_stride_bytes, const int64_t* rows, size_t n, float* out,
                     size_t out_stride) {
  if (nq == 0) return;
  // The kinds of queries[0] decide: one plan prepares every query alike.
  if (const auto* compact = dynamic_cast<const CompactRowsQuery*>(queries[0])) {
    // Each tile widened once for all the queries.
    std::vector<const PreparedQuery*> inner(nq);
    for (size_t j = 0; j < nq; ++j) {
      inner[j] = static_cast<const CompactRowsQuery*>(queries[j])->inner();
    }
    ForWidenedTiles(compact->shape(), base, row_stride_bytes, rows, n,
                    [&](const void* tile, size_t tile_bytes, size_t first, size_t count) {
                      ScoreRowsShared(inner.data(), nq, tile, tile_bytes, TileRowIndices(count),
                                      count, out + first, out_stride);
                    });
    return;
  }
  if (dynamic_cast<const McPreparedQuery*>(queries[0]) != nullptr) {
    std::vector<McKernelQuery> kernels(nq);
    for (size_t j = 0; j < nq; ++j) {
      kernels[j] = static_cast<const McPreparedQuery*>(queries[j])->kernel();
    }
    McScoreRowsShared(kernels.data(), nq, base, row_stride_bytes, rows, n, out, out_stride);
    return;
  }
  const auto* moment = dynamic_cast<const MomentPreparedQuery*>(queries[0]);
  if (moment != nullptr && moment->sums_rows_in_place()) {
    std::vector<MomentKernelQuery> kernels(nq);
    for (size_t j = 0; j < nq; ++j) {
      kernels[j] = static_cast<const MomentPreparedQuery*>(queries[j])->kernel();
    }
    MomentSumRowsShared(kernels.data(), nq, base, row_stride_bytes, rows, n, out, out_stride);
    for (size_t j = 0; j < nq; ++j) {
      static_cast<const MomentPreparedQuery*>(queries[j])->ScoresFromSums(out + j * out_stride, n);
    }
    return;
  }
  for (size_t j = 0; j < nq; ++j) {
    queries[j]->ScoreRows(base, row_stride_bytes, rows, n, out + j * out_stride);
  }
}

Status ValidateScoreParams(const RowShape& shape, const ScoreParams& params) {
  HEDGEDB_RETURN_IF_ERROR(CheckRowShape(shape));
  const ScoreType resolved = ResolveScore(shape.kind, params.score);
  if (!ScoreApplies(shape.kind, resolved)) {
    return Status::InvalidArgument(std::string("score '") + ScoreName(params.score) +
                                   "' does not apply to " + KindName(shape.kind) + " collections");
  }
  if (params.samples < 1 || params.samples > kMaxSamples) {
    return Status::InvalidArgument("samples must be in [1, " + std::to_string(kMaxSamples) +
                                   "], got " + std::to_string(params.samples));
  }
  if (shape.kind == Kind::kMog && params.samples % shape.components != 0) {
    return Status::InvalidArgument("samples (" + std::to_string(params.samples) +
                                   ") must be a multiple of the number of mixture components (" +
                                   std::to_string(shape.components) + ")");
  }
  if (shape.kind != Kind::kCodes) {
    if (!(params.match_a > 0.0f) || !std::isfinite(params.match_a)) {
      return Status::InvalidArgument("match_a must be finite and > 0, got " +
                                     std::to_string(params.match_a));
    }
    if (!std::isfinite(params.match_b)) {
      return Status::InvalidArgument("match_b must be finite");
    }
  }
  return Status::OK();
}

Status ScalarMomentScoreRows(const RowShape& shape, const ScoreParams& params,
                             const float* query_row, const void* base, size_t row_stride_bytes,
                             const int64_t* rows, size_t n, float* out) {
  HEDGEDB_RETURN_IF_ERROR(ValidateScoreParams(shape, params));
  const ScoreType resolved = ResolveScore(shape.kind, params.score);
  if (resolved == ScoreType::kMc || resolved == ScoreType::kLogprob) {
    return Status::InvalidArgument(std::string("score '") + ScoreName(resolved) +
                                   "' has no closed form");
  }
  if (shape.compact()) {  // the float rows of the stored ones, widened exactly
    std::vector<float> widened(n * shape.item_row_size());
    WidenRows(shape, base, row_stride_bytes, rows, n, widened.data());
    std::vector<int64_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = int64_t(i);
    return ScalarMomentScoreRows(FloatRowShape(shape), params, query_row, widened.data(),
                                 shape.item_row_size() * sizeof(float), all.data(), n, out);
  }
  ScalarMomentScorer(shape, resolved, params.match_a, params.match_b, query_row)
      .ScoreRows(base, row_stride_bytes, rows, n, out);
  return Status::OK();
}

Status PrepareQuery(const RowShape& shape, const ScoreParams& params, const float* query_row,
                    std::unique_ptr<PreparedQuery>* out) {
  HEDGEDB_RETURN_IF_ERROR(ValidateScoreParams(shape, params));
  if (shape.compact()) {
    std::unique_ptr<PreparedQuery> inner;
    HEDGEDB_RETURN_IF_ERROR(PrepareQuery(FloatRowShape(shape), params, query_row, &inner));
    out->reset(new CompactRowsQuery(shape, std::move(inner)));
    return Status::OK();
  }
  const ScoreType resolved = ResolveScore(shape.kind, params.score);
  switch (resolved) {
    case ScoreType::kMc:
      out->reset(
          new McPreparedQuery(shape, params, query_row, kQuerySampleStream, kItemSampleStream));
      break;
    case ScoreType::kLogprob:
      out->reset(new CodesPreparedQuery(shape, query_row));
      break;
    default:
      out->reset(new MomentPreparedQuery(shape, params, resolved, query_row));
      break;
  }
  return Status::OK();
}

namespace {

// (ea_id - eb_jd)^2 of the two eta sample banks in the layout of
// GaussianEtaKernelQuery, cached per thread for the last (seed, K, D).
struct EtaPairTables {
  bool valid = false;
  uint64_t seed = 0;
  int samples = 0;
  int dim = 0;
  int pair_stride = 0;
  std::vector<float> delta_sq;
  std::vector<float> mask;
};

const EtaPairTables& EtaPairDeltaSq(uint64_t seed, int samples, int dim) {
  thread_local EtaPairTables cache;
  if (cache.valid && cache.seed == seed && cache.samples == samples && cache.dim == dim) {
    return cache;
  }
  const size_t bank_size = static_cast<size_t>(samples) * dim;
  const std::vector<float> first = CachedNormalBank(seed, kEtaFirstStream, bank_size);
  const std::vector<float>& second = CachedNormalBank(seed, kEtaSecondStream, bank_size);
  const int pairs = samples * samples;
  const int stride = (pairs + 15) / 16 * 16;
  cache.delta_sq.assign(static_cast<size_t>(stride) * dim, 0.0f);
  cache.mask.assign(stride, 0.0f);
  std::fill(cache.mask.begin(), cache.mask.begin() + pairs, 1.0f);
  for (int d = 0; d < dim; ++d) {
    for (int i = 0; i < samples; ++i) {
      for (int j = 0; j < samples; ++j) {
        const float delta =
            first[static_cast<size_t>(i) * dim + d] - second[static_cast<size_t>(j) * dim + d];
        cache.delta_sq[static_cast<size_t>(d) * stride + i * samples + j] = delta * delta;
      }
    }
  }
  cache.valid = true;
  cache.seed = seed;
  cache.samples = samples;
  cache.dim = dim;
  cache.pair_stride = stride;
  return cache;
}

}  // namespace

void UncertaintyRows(const RowShape& shape, const ScoreParams& params, const void* base,
                     size_t row_stride_bytes, const int64_t* rows, size_t n, float* out) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The score type does not matter for eta; only samples, a, b and seed do.
  if (shape.kind != Kind::kGaussian && shape.kind != Kind::kMog) {
    std::fill(out, out + n, nan);
    return;
  }
  if (shape.compact()) {
    ForWidenedTiles(shape, base, row_stride_bytes, rows, n,
                    [&](const void* tile, size_t tile_bytes, size_t first, size_t count) {
                      UncertaintyRows(FloatRowShape(shape), params, tile, tile_bytes,
                                      TileRowIndices(count), count, out + first);
                    });
    return;
  }
  if (shape.kind == Kind::kGaussian) {
    const EtaPairTables& tables = EtaPairDeltaSq(params.seed, params.samples, shape.dim);
    GaussianEtaKernelQuery kernel;
    kernel.dim = shape.dim;
    kernel.samples = params.samples;
    kernel.pair_stride = tables.pair_stride;
    kernel.pair_delta_sq = tables.delta_sq.data();
    kernel.pair_mask = tables.mask.data();
    kernel.match_a = params.match_a;
    kernel.match_b = params.match_b;
    kernel.var_offset = shape.dim;
    GaussianEtaRows(kernel, base, row_stride_bytes, rows, n, out);
    return;
  }
  // Mixtures: sample pairs across components do not cancel the means.
  const size_t bank_size = static_cast<size_t>(params.samples) * shape.dim;
  const std::vector<float> first = CachedNormalBank(params.seed, kEtaFirstStream, bank_size);
  const std::vector<float>& second = CachedNormalBank(params.seed, kEtaSecondStream, bank_size);
  const Layout layout = LayoutOf(shape);
  MixtureEtaKernelQuery kernel;
  kernel.dim = shape.dim;
  kernel.components = shape.components;
  kernel.samples = params.samples;
  kernel.first_eps = first.data();
  kernel.second_eps = second.data();
  kernel.match_a = params.match_a;
  kernel.match_b = params.match_b;
  kernel.weight_offset = layout.weight_offset;
  kernel.mean_offset = layout.mean_offset;
  kernel.var_offset = layout.var_offset;
  MixtureEtaRows(kernel, base, row_stride_bytes, rows, n, out);
}

float Uncertainty(const RowShape& shape, const ScoreParams& params, const float* row) {
  const int64_t first_row = 0;
  float eta = 0.0f;
  UncertaintyRows(FloatRowShape(shape), params, row, 0, &first_row, 1, &eta);
  return eta;
}

float QueryUncertainty(const RowShape& shape, const ScoreParams& params, const float* query_row) {
  if (shape.kind != Kind::kCodes) return Uncertainty(shape, params, query_row);
  if (shape.dim < 1 || shape.code_k < 2) return std::numeric_limits<float>::quiet_NaN();
  // H = ln Z - sum_s p_s (l_s - m), with m the row's largest log-probability
  // and Z = sum_s exp(l_s - m): exact for tables that are not normalized,
  // and -inf entries (probability 0) add nothing.
  const size_t k = size_t(shape.code_k);
  double total = 0;
  for (int j = 0; j < shape.dim; ++j) {
    const float* row = query_row + size_t(j) * k;
    const double m = *std::max_element(row, row + k);
    if (!std::isfinite(m)) return std::numeric_limits<float>::quiet_NaN();
    double z = 0, weighted = 0;
    for (size_t s = 0; s < k; ++s) {
      const double e = std::exp(double(row[s]) - m);  // 0 for -inf
      z += e;
      if (e > 0) weighted += e * (double(row[s]) - m);
    }
    total += std::log(z) - weighted / z;
  }
  const double eta = total / (double(shape.dim) * std::log(double(k)));
  return float(std::min(std::max(eta, 0.0), 1.0));
}

}  // namespace query
}  // namespace hedgedb
