// The area under the error-versus-reject curve of a confidence
// ("Probabilistic Embeddings Revisited", section 5; docs/calibration.md,
// "Error-versus-reject area"): the calibration report's computation, for
// evaluations outside a database (hedgedb evaluate's ERC of recall@1).
#pragma once

#include <limits>
#include <vector>

#include "hedgedb/export.h"

namespace hedgedb {

struct ErrorRejectAreas {
  // Queries sorted by confidence, most confident first; the error (share
  // answered wrongly) of the m most confident, averaged over m = 1..n. Ties
  // in confidence count the group's mean at every cut. Lower is better.
  double area = std::numeric_limits<double>::quiet_NaN();
  // The same with the errors rejected first: the least any confidence can
  // reach on these answers.
  double oracle = std::numeric_limits<double>::quiet_NaN();
  // A confidence that says nothing (all tied): the overall error.
  double chance = std::numeric_limits<double>::quiet_NaN();
};

// One confidence and one outcome per query. All three areas are NaN for no
// queries, `area` also for a NaN confidence.
HEDGEDB_EXPORT ErrorRejectAreas MeasureErrorReject(const std::vector<double>& confidence,
                                                   const std::vector<bool>& correct);

}  // namespace hedgedb
