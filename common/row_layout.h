// The row layout of stored items, shared by the collection's in-memory arena,
// the record codec, the coarse index and the scorers:
//   point:    float [z (D)]
//   gaussian: float [mu (D), var (D)]
//   mog:      float [w (C), mu (C*D), var (C*D)]
//   codes:    uint8 [c (d)]
#pragma once

#include <cstddef>

#include "hedgedb/types.h"

namespace hedgedb {

// Elements per item row: floats for point/gaussian/mog, bytes for codes.
inline size_t ItemRowSize(const CollectionSpec& s) {
  switch (s.kind) {
    case Kind::kPoint:
      return size_t(s.dim);
    case Kind::kGaussian:
      return 2 * size_t(s.dim);
    case Kind::kMog:
      return size_t(s.components) * (1 + 2 * size_t(s.dim));
    case Kind::kCodes:
      return size_t(s.dim);
  }
  return 0;
}

// Bytes per item row.
inline size_t ItemRowBytes(const CollectionSpec& s) {
  return s.kind == Kind::kCodes ? ItemRowSize(s) : ItemRowSize(s) * sizeof(float);
}

// Floats per query row (codes: the d x k log-probability table).
inline size_t QueryRowSize(const CollectionSpec& s) {
  return s.kind == Kind::kCodes ? size_t(s.dim) * size_t(s.code_k) : ItemRowSize(s);
}

}  // namespace hedgedb
