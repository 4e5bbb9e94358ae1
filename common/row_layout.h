// The row layout of stored items, shared by the collection's in-memory arena,
// the record codec, the coarse indexes and the scorers (the one place it is
// written down):
//   point:    float [z (D)]
//   gaussian: float [mu (D), var (D)]
//   mog:      float [w (C), mu (C*D), var (C*D)]
//   codes:    uint8 [c (d)]
// Queries use the item layout, except codes: float [log p (d*k)].
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hedgedb/types.h"

namespace hedgedb {

// What the layout depends on: a collection's kind and dimensions.
struct RowShape {
  Kind kind = Kind::kGaussian;
  int dim = 0;         // D, or d for codes
  int components = 1;  // C (mog)
  int code_k = 0;      // k (codes)

  // 1 except for mixtures.
  size_t mixture_components() const { return kind == Kind::kMog ? size_t(components) : 1; }
  // Floats per item row (point/gaussian/mog) or bytes per item row (codes).
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
  size_t item_row_bytes() const {
    return kind == Kind::kCodes ? item_row_size() : item_row_size() * sizeof(float);
  }
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
  return shape;
}

// Elements per item row: floats for point/gaussian/mog, bytes for codes.
inline size_t ItemRowSize(const CollectionSpec& s) { return RowShapeOf(s).item_row_size(); }
// Bytes per item row.
inline size_t ItemRowBytes(const CollectionSpec& s) { return RowShapeOf(s).item_row_bytes(); }
// Floats per query row (codes: the d x k log-probability table).
inline size_t QueryRowSize(const CollectionSpec& s) { return RowShapeOf(s).query_row_size(); }

// Packs row i of `v` (checked input, see query/row_checks.h) into an item row
// (row_bytes bytes): code symbols as bytes; mixture weights normalised to sum
// exactly 1 (uniform when v.weights is null).
inline void PackItemRow(const RowShape& shape, const EmbeddingView& v, int64_t i, uint8_t* row) {
  const size_t D = size_t(shape.dim), C = shape.mixture_components();
  if (shape.kind == Kind::kCodes) {
    for (size_t j = 0; j < D; ++j) row[j] = uint8_t(v.codes[i * D + j]);
    return;
  }
  float* f = reinterpret_cast<float*>(row);
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

// Packs query i of `v` into a query row (query_row_size() floats).
inline void PackQueryRow(const RowShape& shape, const EmbeddingView& v, int64_t i, float* row) {
  if (shape.kind == Kind::kCodes) {
    const size_t per = shape.query_row_size();
    std::memcpy(row, v.logp + i * per, per * sizeof(float));
  } else {
    PackItemRow(shape, v, i, reinterpret_cast<uint8_t*>(row));
  }
}

// First two moments of a gaussian or mog row, per dimension (D doubles each):
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
