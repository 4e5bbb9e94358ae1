// Exact scores without a database: the stage-2 scores and eta of a search,
// for blocks of embeddings held by the caller (evaluation, re-ranking, tests).
// The numbers are those an exhaustive DB::Search of a collection with the same
// spec returns for the same samples and seed.
#pragma once

#include <cstdint>
#include <vector>

#include "hedgedb/export.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {

// What SearchOptions sets for a search's scores.
struct ScoreOptions {
  ScoreType score = ScoreType::kDefault;
  // Monte Carlo samples per side; 0 uses spec.samples.
  int samples = 0;
  // Seed of the Monte Carlo samples; used when has_seed, else spec.seed.
  bool has_seed = false;
  uint64_t seed = 0;
};

// Scores every query against every item: (*scores)[q * items.n + i] is the
// score of item i for query q. Only the kind, sizes (dim, components, code_k),
// match_a/b, samples and seed of `spec` are used. Queries and items are
// checked as DB::Search and DB::Ingest check them (same errors); the score
// must apply to the kind. Queries run in parallel.
HEDGEDB_EXPORT Status ScoreMatrix(const CollectionSpec& spec, const EmbeddingView& queries,
                                  const EmbeddingView& items, const ScoreOptions& options,
                                  std::vector<float>* scores);

// eta = 1 - p(m | x, x) of every row of `items` (item layout), as
// SearchHit::uncertainty reports it: NaN for point and codes. Depends on
// samples, seed and match_a/b, not on the score.
HEDGEDB_EXPORT Status ItemUncertainties(const CollectionSpec& spec, const EmbeddingView& items,
                                        const ScoreOptions& options, std::vector<float>* eta);

}  // namespace hedgedb
