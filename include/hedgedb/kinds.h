// Embedding kinds and score types, and their names.
#pragma once

#include <string>

#include "hedgedb/export.h"

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

}  // namespace hedgedb
