#include "report/uncertainty_curve.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hedgedb {
namespace report {
namespace {

Status Validate(const std::vector<QueryOutcome>& queries, const UncertaintyCurveOptions& options) {
  if (queries.empty()) return Status::InvalidArgument("uncertainty curve: no queries");
  if (!(options.max_drop >= 0 && options.max_drop < 1))
    return Status::InvalidArgument("uncertainty curve: max_drop must be in [0, 1), got " +
                                   std::to_string(options.max_drop));
  if (options.steps < 1)
    return Status::InvalidArgument("uncertainty curve: steps must be >= 1, got " +
                                   std::to_string(options.steps));
  for (size_t i = 0; i < queries.size(); ++i)
    if (std::isnan(queries[i].uncertainty))
      return Status::InvalidArgument("uncertainty curve: query " + std::to_string(i) +
                                     " has a NaN uncertainty");
  return Status::OK();
}

// Queries kept at step i: n minus the rounded number dropped, at least one.
int64_t KeptAt(int64_t n, const UncertaintyCurveOptions& options, int i) {
  const double f = options.max_drop * i / options.steps;
  const int64_t dropped = std::llround(f * double(n));
  return std::max<int64_t>(1, n - dropped);
}

}  // namespace

Status UncertaintyCurve(const std::vector<QueryOutcome>& queries,
                        std::vector<UncertaintyPoint>* curve,
                        const UncertaintyCurveOptions& options) {
  HEDGEDB_RETURN_IF_ERROR(Validate(queries, options));
  const int64_t n = int64_t(queries.size());
  std::vector<QueryOutcome> sorted = queries;
  // Most certain first: a prefix of `sorted` is what is kept.
  std::sort(sorted.begin(), sorted.end(), [](const QueryOutcome& a, const QueryOutcome& b) {
    return a.uncertainty < b.uncertainty;
  });
  std::vector<int64_t> correct_before(size_t(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    correct_before[size_t(i) + 1] = correct_before[size_t(i)] + (sorted[size_t(i)].correct ? 1 : 0);

  std::vector<UncertaintyPoint> out;
  out.reserve(size_t(options.steps) + 1);
  for (int i = 0; i <= options.steps; ++i) {
    const int64_t kept = KeptAt(n, options, i);
    // The group of ties the cut falls in: [lo, hi) share the uncertainty of
    // the last kept query.
    const double u = sorted[size_t(kept - 1)].uncertainty;
    const auto by_u = [](const QueryOutcome& q, double v) { return q.uncertainty < v; };
    const int64_t lo = std::lower_bound(sorted.begin(), sorted.end(), u, by_u) - sorted.begin();
    const int64_t hi =
        std::upper_bound(sorted.begin(), sorted.end(), u,
                         [](double v, const QueryOutcome& q) { return v < q.uncertainty; }) -
        sorted.begin();
    const double group_rate =
        double(correct_before[size_t(hi)] - correct_before[size_t(lo)]) / double(hi - lo);
    const double correct_kept = double(correct_before[size_t(lo)]) + double(kept - lo) * group_rate;
    out.push_back({double(n - kept) / double(n), kept, correct_kept / double(kept)});
  }
  *curve = std::move(out);
  return Status::OK();
}

Status OracleUncertaintyCurve(const std::vector<QueryOutcome>& queries,
                              std::vector<UncertaintyPoint>* curve,
                              const UncertaintyCurveOptions& options) {
  HEDGEDB_RETURN_IF_ERROR(Validate(queries, options));
  const int64_t n = int64_t(queries.size());
  int64_t correct = 0;
  for (const QueryOutcome& q : queries) correct += q.correct ? 1 : 0;
  std::vector<UncertaintyPoint> out;
  out.reserve(size_t(options.steps) + 1);
  for (int i = 0; i <= options.steps; ++i) {
    const int64_t kept = KeptAt(n, options, i);
    out.push_back(
        {double(n - kept) / double(n), kept, std::min(1.0, double(correct) / double(kept))});
  }
  *curve = std::move(out);
  return Status::OK();
}

}  // namespace report
}  // namespace hedgedb
