// Whether a collection's soft-contrastive match parameters can express a
// match at all (docs/concepts.md, "The defaults cannot express a match").
#pragma once

#include <string>

#include "hedgedb/export.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {

// Why match_a/b of `spec` make nonsense of a search with `score` (kDefault:
// the kind's default) and, with `uncertainty`, of eta; empty when they do
// not. With match_b <= 0, sigmoid(-a * ||z1 - z2|| + b) is at most 0.5 for
// every pair, so no pair can score as a match: the mc and match scores stay
// below 0.5 (an item against itself included) and every eta = 1 - p(m|x,x)
// is at least 0.5. The defaults (a = 1, b = 0) are such parameters. The
// text names the fix. Codes collections, and searches whose score and eta
// do not read a and b (mls, csd, l2 without eta), get none. `hedgedb create`
// and `search` print it as a warning, and Python warns with it.
HEDGEDB_EXPORT std::string MatchParametersNote(const CollectionSpec& spec,
                                               ScoreType score = ScoreType::kDefault,
                                               bool uncertainty = true);

// Fits match_a and match_b to labelled items (one label each, at least two
// labels and one same-label pair): the class-balanced maximum-likelihood
// (a, b) of HIB's Monte Carlo match probability over seeded pairs of the
// items (docs/calibration.md, "Match parameters"), what DB::Calibrate does
// for a collection whose own cannot express a match. Gaussian and mog
// specs only (dim, components); the items are checked as an ingest checks
// them.
HEDGEDB_EXPORT Status FitMatchParameters(const CollectionSpec& spec, const EmbeddingView& items,
                                         const int64_t* labels, uint64_t seed, float* match_a,
                                         float* match_b);

}  // namespace hedgedb
