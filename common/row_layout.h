// The row layout of stored items, shared by the collection's in-memory arena,
// the record codec, the coarse indexes and the scorers (the one place it is
// written down):
//   point:    value [z (D)]
//   gaussian: value [mu (D), var (D)]
//   mog:      float [w (C)], value [mu (C*D), var (C*D)]
//   codes:    uint8 [c (d)]
// where a value is a float, or with a compact row format (RowFormat,
// hedgedb/collection_spec.h) a float16 or bfloat16 (common/half.h). The
// records, the arena and its snapshot hold these bytes alike. Whatever reads
// a vector row's numbers widens it first (WidenItemRow, WidenRows) to the
// float32 row of the same layout, which the scorers, the coarse index and
// get read; offsets below count elements of that float row.
// Queries are always float rows of the item layout, except codes:
// float [log p (d*k)].
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "hedgedb/types.h"

namespace hedgedb {

// What the layout depends on: a collection's kind and dimensions.
struct RowShape {
  Kind kind = Kind::kGaussian;
  int dim = 0;                             // D, or d for codes
  int components = 1;                      // C (mog)
  int code_k = 0;                          // k (codes)
  RowFormat format = RowFormat::kFloat32;  // of the stored item rows' values

  // 1 except for mixtures.
  size_t mixture_components() const { return kind == Kind::kMog ? size_t(components) : 1; }
  // Floats per (widened) item row (point/gaussian/mog) or bytes per item row
  // (codes).
  size_t item_row_size() const {
    switch (kind) {
      case Kind::kPoint:
      case Kind::kCodes:
        return size_t(dim);
      case Kind::kGaussian:
        return 2 * size_t(dim);
      case Kind::kMog:
        return size_t(components) * (1 + 2 * size_t(dim));
    }
    return 0;
  }
  // Whether stored rows differ from their float rows (a compact format of a
  // vector kind).
  bool compact() const { return kind != Kind::kCodes && format != RowFormat::kFloat32; }
  // Bytes per stored item row: the float row, or with a compact format its
  // mixture weights as floats and 2 bytes per other value.
  size_t item_row_bytes() const {
    if (kind == Kind::kCodes) return item_row_size();
    if (!compact()) return item_row_size() * sizeof(float);
    return weights_count() * sizeof(float) + (item_row_size() - weights_count()) * 2;
  }
  // The mixture weights at the start of a mog row (0 for other kinds).
  size_t weights_count() const { return kind == Kind::kMog ? size_t(components) : 0; }
  // Floats per query row (codes: the d x k log-probability table).
  size_t query_row_size() const {
    return kind == Kind::kCodes ? size_t(dim) * size_t(code_k) : item_row_size();
  }
  // Offsets in floats of a vector row's parts (weights: mog only).
  size_t weights_offset() const { return 0; }
  size_t mean_offset() const { return kind == Kind::kMog ? size_t(components) : 0; }
  size_t var_offset() const { return mean_offset() + mixture_components() * size_t(dim); }
};

inline RowShape RowShapeOf(const CollectionSpec& s) {
  RowShape shape;
  shape.kind = s.kind;
  shape.dim = s.dim;
  shape.components = s.components;
  shape.code_k = s.code_k;
  shape.format = s.row_format;
  return shape;
}

// The same shape with float32 rows: what a float row of it (a query row, a
// widened item row) is.
inline RowShape FloatRowShape(RowShape shape) {
  shape.format = RowFormat::kFloat32;
  return shape;
}

// Elements per item row: floats for point/gaussian/mog, bytes for codes.
inline size_t ItemRowSize(const CollectionSpec& s) { return RowShapeOf(s).item_row_size(); }
// Bytes per stored item row.
inline size_t ItemRowBytes(const CollectionSpec& s) { return RowShapeOf(s).item_row_bytes(); }
// Floats per query row (codes: the d x k log-probability table).
inline size_t QueryRowSize(const CollectionSpec& s) { return RowShapeOf(s).query_row_size(); }

// The float row (item_row_size() floats) of a stored vector row.
inline void WidenItemRow(const RowShape& shape, const uint8_t* row, float* out) {
  if (!shape.compact()) {
    std::memcpy(out, row, shape.item_row_size() * sizeof(float));
    return;
  }
  const size_t w = shape.weights_count();
  std::memcpy(out, row, w * sizeof(float));
  const uint16_t* values = reinterpret_cast<const uint16_t*>(row + w * sizeof(float));
  const size_t n = shape.item_row_size() - w;
  if (shape.format == RowFormat::kFloat16) {
    HalvesToFloats(values, n, out + w);
  } else {
    Bfloat16sToFloats(values, n, out + w);
  }
}

// The stored row (item_row_bytes() bytes) of a float row: values rounded to
// nearest even in the row format. Range checks come first
// (query/row_checks.h): a value out of the format's range would be stored
// as infinity.
inline void NarrowItemRow(const RowShape& shape, const float* row, uint8_t* out) {
  if (!shape.compact()) {
    std::memcpy(out, row, shape.item_row_size() * sizeof(float));
    return;
  }
  const size_t w = shape.weights_count();
  std::memcpy(out, row, w * sizeof(float));
  const size_t n = shape.item_row_size() - w;
  uint16_t* values = reinterpret_cast<uint16_t*>(out + w * sizeof(float));
  const bool half = shape.format == RowFormat::kFloat16;
  for (size_t j = 0; j < n; ++j) {
    values[j] = half ? FloatToHalf(row[w + j]) : FloatToBfloat16(row[w + j]);
  }
}

// The float rows of n stored rows (row i at base + rows[i] * stride_bytes;
// rows null: rows 0..n-1), back to back in out (n x item_row_size() floats).
// Rows named by a candidate list are scattered over the arena: each is
// fetched kWidenPrefetchAhead rows before it is widened, as the float32
// kernels prefetch theirs, else every row waits for memory in turn (a
// profile of float16 searches on 311,470 real embeddings spent 2.5x the Monte
// Carlo kernel's time in this loop without it).
constexpr size_t kWidenPrefetchAhead = 8;
inline void WidenRows(const RowShape& shape, const void* base, size_t stride_bytes,
                      const int64_t* rows, size_t n, float* out) {
  const size_t floats = shape.item_row_size();
  const auto* bytes = static_cast<const uint8_t*>(base);
  for (size_t i = 0; i < n; ++i) {
#if defined(__GNUC__)
    if (rows && i + kWidenPrefetchAhead < n) {
      const uint8_t* ahead = bytes + size_t(rows[i + kWidenPrefetchAhead]) * stride_bytes;
      for (size_t b = 0; b < stride_bytes; b += 64) __builtin_prefetch(ahead + b);
    }
#endif
    const int64_t r = rows ? rows[i] : int64_t(i);
    WidenItemRow(shape, bytes + size_t(r) * stride_bytes, out + i * floats);
  }
}

// Packs row i of `v` (checked input, see query/row_checks.h) into a float
// row (item_row_size() floats) whatever the shape's format: mixture weights
// normalised to sum exactly 1 (uniform when v.weights is null).
inline void PackFloatRow(const RowShape& shape, const EmbeddingView& v, int64_t i, float* f) {
  const size_t D = size_t(shape.dim), C = shape.mixture_components();
  if (shape.kind == Kind::kPoint) {
    std::memcpy(f, v.vec + i * D, D * sizeof(float));
    return;
  }
  if (shape.kind == Kind::kMog) {
    double sum = 0;
    for (size_t c = 0; c < C; ++c) sum += v.weights ? v.weights[i * C + c] : 1.0;
    for (size_t c = 0; c < C; ++c) {  // exactly normalised
      f[shape.weights_offset() + c] = float((v.weights ? v.weights[i * C + c] : 1.0) / sum);
    }
  }
  std::memcpy(f + shape.mean_offset(), v.mean + i * C * D, C * D * sizeof(float));
  std::memcpy(f + shape.var_offset(), v.var + i * C * D, C * D * sizeof(float));
}

// Packs row i of `v` (checked input, see query/row_checks.h) into a stored
// item row (item_row_bytes() bytes): code symbols as bytes; vector rows as
// PackFloatRow, in the shape's row format (NarrowItemRow).
inline void PackItemRow(const RowShape& shape, const EmbeddingView& v, int64_t i, uint8_t* row) {
  const size_t D = size_t(shape.dim);
  if (shape.kind == Kind::kCodes) {
    for (size_t j = 0; j < D; ++j) row[j] = uint8_t(v.codes[i * D + j]);
    return;
  }
  if (!shape.compact()) {
    PackFloatRow(shape, v, i, reinterpret_cast<float*>(row));
    return;
  }
  thread_local std::vector<float> f;
  f.resize(shape.item_row_size());
  PackFloatRow(shape, v, i, f.data());
  NarrowItemRow(shape, f.data(), row);
}

// Packs query i of `v` into a query row (query_row_size() floats).
// Queries are float rows whatever the collection's row format.
inline void PackQueryRow(const RowShape& shape, const EmbeddingView& v, int64_t i, float* row) {
  if (shape.kind == Kind::kCodes) {
    const size_t per = shape.query_row_size();
    std::memcpy(row, v.logp + i * per, per * sizeof(float));
  } else {
    PackFloatRow(shape, v, i, row);
  }
}

// First two moments of a gaussian or mog float row, per dimension (D doubles each):
// for a mixture mu = sum_c w_c mu_c and var = sum_c w_c (var_c + (mu_c - mu)^2).
inline void RowMoments(const RowShape& shape, const float* row, double* mean, double* var) {
  const size_t dim = size_t(shape.dim), components = shape.mixture_components();
  const float* weights = row + shape.weights_offset();
  const float* mu = row + shape.mean_offset();
  const float* s2 = row + shape.var_offset();
  for (size_t d = 0; d < dim; ++d) {
    if (shape.kind != Kind::kMog) {
      mean[d] = mu[d];
      var[d] = s2[d];
      continue;
    }
    double m = 0.0;
    for (size_t c = 0; c < components; ++c) m += double(weights[c]) * mu[c * dim + d];
    double v = 0.0;
    for (size_t c = 0; c < components; ++c) {
      const double delta = mu[c * dim + d] - m;
      v += double(weights[c]) * (s2[c * dim + d] + delta * delta);
    }
    mean[d] = m;
    var[d] = v;
  }
}

}  // namespace hedgedb
