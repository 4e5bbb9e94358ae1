// What defines a collection (fixed at creation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hedgedb/export.h"
#include "hedgedb/kinds.h"

namespace hedgedb {

// How a collection stores the means and variances of its item rows (point,
// gaussian and mog collections; DIMCO codes are bytes whatever it says).
// float16 and bfloat16 halve the memory and disk per item: values are
// rounded to nearest-even at ingest, and everything that reads a row (the
// scorers, the coarse index, get) reads the rounded value widened exactly to
// float32. Mixture weights stay float32 (their exact normalisation).
// float16 keeps 11 significant bits and refuses values it cannot hold to
// that precision (docs/formats.md, "Row formats"); bfloat16 keeps 8 and
// float32's range.
enum class RowFormat { kFloat32, kFloat16, kBfloat16 };

HEDGEDB_EXPORT const char* RowFormatName(RowFormat format);
HEDGEDB_EXPORT bool ParseRowFormat(const std::string& name, RowFormat* format);

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
  // The stored rows' number format (RowFormat above).
  RowFormat row_format = RowFormat::kFloat32;
  // Free UTF-8 text the application keeps with the collection, at most
  // kMaxCollectionMetadata bytes (it is stored with the collection's
  // descriptor, which every write rewrites); hedgedb never interprets it.
  // `hedgedb ingest-images` records how it read the images here (JSON), so
  // that later commands read queries the same way.
  std::string metadata;
};
constexpr size_t kMaxCollectionMetadata = 4096;

// The default Monte Carlo samples per side of a collection with `components`
// mixture components: CollectionSpec().samples, rounded up to a multiple of
// the components (stratified mixture sampling needs one).
HEDGEDB_EXPORT int DefaultSamples(int components);

}  // namespace hedgedb
