// Fitting a collection's soft-contrastive match parameters (match_a, match_b)
// to labelled items, by maximum likelihood of the match probability that the
// mc score and eta read (docs/calibration.md, "Match parameters").
#pragma once

#include <cstdint>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"

namespace hedgedb {
namespace query {

// Pairs of labelled items and, per pair, `samples` distances ||z1 - z2|| of
// draws z1, z2 from the two items' distributions.
struct MatchPairs {
  int samples = 0;
  std::vector<float> distances;  // pairs x samples
  std::vector<uint8_t> same_label;
  int64_t positives = 0;
  int64_t pairs() const { return int64_t(same_label.size()); }
};

// Draws the pairs from `rows` (item rows of a gaussian or mog collection:
// [mu, var] or [w, mu, var], ItemRowSize floats each) and their labels:
// every same-label pair when there are at most `max_pairs` / 2 of them, else
// that many drawn uniformly among them (a label by its share of the pairs,
// then two of its items), and as many pairs of different labels drawn from
// all items. Fails when no label has two items, or there is one label.
Status DrawMatchPairs(const CollectionSpec& spec, const std::vector<const float*>& rows,
                      const std::vector<int64_t>& labels, uint64_t seed, MatchPairs* out,
                      int64_t max_pairs = 60000, int samples = 16);

// The (a, b) that maximise the class-balanced log likelihood of the labels
// under the Monte Carlo match probability of HIB (eq. 5),
//   p(m | pair) = 1/K sum_k sigmoid(-a * d_k + b),
// where same-label pairs and the others weigh half each: the fitted p is
// then 0.5 where a distance is as likely from a match as from a non-match,
// whatever the collection's base rate, which is what the trained encoders'
// a and b express (the calibration map, fitted after, turns scores into
// probabilities at the real base rate). Damped Newton steps on (log a, b)
// from a = 1 / sd, b = mean / sd of the mean distances (p = 1/2 at their
// mean); a stays in (0, 50 / sd]: labels the distances separate perfectly
// would drive a to infinity, and the cap keeps p a slope. Fails when the
// labels do not depend on the distance (the optimum has a -> 0).
struct MatchFit {
  double match_a = 0, match_b = 0;
  double log_loss = 0;  // the balanced log loss at (a, b)
  int iterations = 0;
};
Status FitMatchParameters(const MatchPairs& pairs, MatchFit* out);

// Both steps on items given as a view with one label each (evaluate on
// embedding files): the rows are checked as an ingest checks them.
Status FitMatchParametersOfView(const CollectionSpec& spec, const EmbeddingView& items,
                                const int64_t* labels, uint64_t seed, MatchFit* out);

}  // namespace query
}  // namespace hedgedb
