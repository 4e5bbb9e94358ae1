// Accuracy of the queries kept as the most uncertain ones are dropped (HIB,
// Oh et al. 2019, Figure 4). Pure math: no drawing, no Cairo.
#pragma once

#include <cstdint>
#include <vector>

#include "hedgedb/status.h"

namespace hedgedb {
namespace report {

// One query: how uncertain its answer was (any scale, higher = less sure, for
// example 1 - top-1 probability) and whether its top-1 answer was right.
struct QueryOutcome {
  double uncertainty = 0;
  bool correct = false;
};

// One point of the curve.
struct UncertaintyPoint {
  double fraction_dropped = 0;  // dropped / queries, as actually dropped
  int64_t kept = 0;             // queries kept (always >= 1)
  double accuracy = 0;          // fraction of the kept queries answered right
};

struct UncertaintyCurveOptions {
  // Points at fractions max_drop * i / steps, i = 0..steps. max_drop < 1 so
  // that at least one query is always kept.
  double max_drop = 0.9;
  int steps = 18;
};

// The accuracy (precision@1 when `correct` is top-1 correctness) of the
// queries kept after dropping the round(f x n) most uncertain ones, for each
// fraction f. Queries with equal uncertainty are not ordered: when the cut
// falls inside such a group, the kept part counts the group's mean
// correctness (the expectation over random tie breaking), so a constant
// uncertainty gives a flat curve. Errors: no queries, a NaN uncertainty,
// max_drop outside [0, 1) or steps < 1; *curve is then left unchanged.
Status UncertaintyCurve(const std::vector<QueryOutcome>& queries,
                        std::vector<UncertaintyPoint>* curve,
                        const UncertaintyCurveOptions& options = {});

// The best any uncertainty could do on these queries: errors dropped first,
// so the accuracy is min(1, correct / kept). Same points and errors as
// UncertaintyCurve.
Status OracleUncertaintyCurve(const std::vector<QueryOutcome>& queries,
                              std::vector<UncertaintyPoint>* curve,
                              const UncertaintyCurveOptions& options = {});

}  // namespace report
}  // namespace hedgedb
