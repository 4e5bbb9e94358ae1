#include "query/knob_fit.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <unordered_set>
#include <utility>

#include "common/row_layout.h"
#include "query/scorer.h"

namespace hedgedb {
namespace query {
namespace {

// What rescoring one candidate costs, in coarse vectors scanned by stage 1:
// measured once at 10M items (bench/RESULTS.md, "Ten million items, second
// measurement", clustered D = 64, default score mc, 1 thread): doubling
// nprobe 16 -> 32 (39,000 more vectors of 65 floats) added 0.65 ms, 17 ns a
// vector; 100 -> 400 candidates at nprobe 16 added 0.23 ms, 0.77 us a
// candidate: 46 vectors (the resampled real embeddings, D = 32: 67). A
// round 50 keeps the model simple; the choice is not sensitive to it within
// a factor of two on that table.
constexpr double kCandidateCost = 50;
// An HNSW search expands about efSearch (at least the candidates) nodes and
// computes the distance of each one's level-0 neighbours (2M of them).
constexpr int kHnswNeighboursPerM = 2;
// The widest efSearch the fit tries (as CoarseIndex::TuneKnobs).
constexpr int kMaxFitEfSearch = 4096;
// A doubling that gains less than this (in recall) does not pay (as the
// coarse fit: then something else limits the recall).
constexpr double kMinDoublingGain = 0.005;
// Rows scored per block of the truth (per thread): the block's scores of
// every query stay in cache-sized memory (50 x 4,096 floats).
constexpr int64_t kTruthBlockRows = 4096;

using Scored = std::pair<float, int64_t>;  // (score, id)

// Best first: higher score, then lower id (as the searcher orders ties).
bool Better(const Scored& a, const Scored& b) {
  if (a.first != b.first) return a.first > b.first;
  return a.second < b.second;
}

// Keeps the best `k` of *v (unordered beyond that).
void Prune(std::vector<Scored>* v, size_t k) {
  if (v->size() <= k) return;
  std::nth_element(v->begin(), v->begin() + ptrdiff_t(k - 1), v->end(), Better);
  v->resize(k);
}

// The exact top-k ids by `params`' score of every row but the query's own
// (`self`: its id) for each query.
Status ExactTop(const RowShape& shape, const ScoreParams& params, const std::vector<uint8_t>& rows,
                const std::vector<int64_t>& ids, const std::vector<float>& queries,
                const std::vector<int64_t>& self, int64_t nq, int64_t k,
                std::vector<std::unordered_set<int64_t>>* truth) {
  const size_t floats = shape.query_row_size();
  const size_t stride = shape.item_row_bytes();
  const int64_t n = int64_t(ids.size());
  std::vector<std::unique_ptr<PreparedQuery>> prepared(static_cast<size_t>(nq));
  std::vector<const PreparedQuery*> pointers(static_cast<size_t>(nq));
  for (int64_t q = 0; q < nq; ++q) {
    HEDGEDB_RETURN_IF_ERROR(
        PrepareQuery(shape, params, queries.data() + size_t(q) * floats, &prepared[size_t(q)]));
    pointers[size_t(q)] = prepared[size_t(q)].get();
  }
  const int threads = std::max(1, omp_get_max_threads());
  // Per thread and query, the best rows seen (at most 2k between prunes).
  std::vector<std::vector<std::vector<Scored>>> best(
      static_cast<size_t>(threads), std::vector<std::vector<Scored>>(static_cast<size_t>(nq)));
  const int64_t blocks = (n + kTruthBlockRows - 1) / kTruthBlockRows;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    std::vector<int64_t> block_rows(static_cast<size_t>(kTruthBlockRows));
    std::vector<float> scores(static_cast<size_t>(nq * kTruthBlockRows));
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t r0 = b * kTruthBlockRows, m = std::min(kTruthBlockRows, n - r0);
      for (int64_t j = 0; j < m; ++j) block_rows[size_t(j)] = r0 + j;
      ScoreRowsShared(pointers.data(), size_t(nq), rows.data(), stride, block_rows.data(),
                      size_t(m), scores.data(), size_t(m));
      for (int64_t q = 0; q < nq; ++q) {
        std::vector<Scored>& mine = best[size_t(t)][size_t(q)];
        for (int64_t j = 0; j < m; ++j) {
          const Scored s(scores[size_t(q * m + j)], ids[size_t(r0 + j)]);
          // Only what beats the current k-th can enter (NaN scores never do).
          if (!(s.first == s.first) || s.second == self[size_t(q)]) continue;
          if (int64_t(mine.size()) >= k) {
            const Scored& kth = mine[size_t(k - 1)];
            if (!Better(s, kth)) continue;
          }
          mine.push_back(s);
          // Sorted whenever it first holds k, and pruned back to k at 2k:
          // mine[k - 1] is then a k-th best at some point, a safe bar.
          if (int64_t(mine.size()) == k || int64_t(mine.size()) >= 2 * k) {
            Prune(&mine, size_t(k));
            std::sort(mine.begin(), mine.end(), Better);
          }
        }
        Prune(&mine, size_t(k));
        std::sort(mine.begin(), mine.end(), Better);
      }
    }
  }
  truth->assign(size_t(nq), {});
  for (int64_t q = 0; q < nq; ++q) {
    std::vector<Scored> all;
    for (int t = 0; t < threads; ++t) {
      all.insert(all.end(), best[size_t(t)][size_t(q)].begin(), best[size_t(t)][size_t(q)].end());
    }
    Prune(&all, size_t(k));
    for (const Scored& s : all) (*truth)[size_t(q)].insert(s.second);
  }
  return Status::OK();
}

}  // namespace

double DefaultSearchCost(const index::FactoryShape& shape, int64_t n,
                         const index::CoarseSearchKnobs& knobs, int64_t candidates) {
  double stage_one = 0;
  if (shape.ivf_lists > 0) {
    // The centroids, then the probed lists' share of the vectors.
    stage_one =
        double(shape.ivf_lists) + double(knobs.nprobe) / double(shape.ivf_lists) * double(n);
  } else if (shape.hnsw_m > 0) {
    stage_one = double(std::max<int64_t>(knobs.ef_search, candidates)) * kHnswNeighboursPerM *
                double(shape.hnsw_m);
  } else {
    // Flat: every vector, whatever the candidates (their cost alone varies).
    stage_one = double(n);
  }
  return stage_one + kCandidateCost * double(candidates);
}

Status WalkFitLadder(const index::FactoryShape& shape, int64_t n,
                     const index::CoarseSearchKnobs& static_knobs, const RungRecall& recall_at,
                     SearchFit* fit) {
  fit->rungs.clear();
  fit->fitted = false;
  const bool ivf = shape.ivf_lists > 0;
  // Flat (no lists, no graph): no knob, one row along the candidates.
  const bool flat = shape.flat();
  if (n < 2) return Status::OK();
  const SearchOptions defaults;
  const int64_t first_candidates = std::min<int64_t>(int64_t(defaults.k) * 10, n);
  const int64_t last_candidates = std::min<int64_t>(kFitCandidateSteps * defaults.k * 10, n);

  // The ladder. Along the candidates, a knob's row stops at the target or
  // where a doubling gains nothing (stage 1's reach limits); along the
  // knob, the ladder stops where the target is met at the fewest
  // candidates, where a doubling at or above the static knob gains nothing
  // at any candidate count both rows measured (the candidates limit), where
  // stage 1 alone already costs more than the best pair found, or at the
  // widest knob.
  //
  // IVF: nprobe starts at one list, the fewest a search probes, and doubles
  // (so the static max(8, nlist / 64), a power of two wherever nlist is one,
  // stays a rung). Clustered data may reach the target far below the static
  // knob (100,000 clustered Gaussians, D = 64, IVF1024: nprobe 2 or 4 with
  // 100 candidates, estimates 0.992-1.000, at about half the latency of the
  // static nprobe 16), and the rungs down there are cheap (each scans fewer
  // lists than the static knob's). Below the static knob a doubling's gain
  // does not end the ladder: where few lists hold the truth (data with
  // little cluster structure: about nprobe / nlist of it), a doubling from
  // 1 to 2 lists gains well under kMinDoublingGain while the recall is still
  // far from the target (FitLadderTest.UnclusteredDataClimbsPastTheStaticKnob),
  // and even clustered data can gain little from 2 to 4 lists and much from
  // 4 to 8. So from the static knob up the ladder measures what it did when
  // it started there, and where that reached the target, the pair it picks
  // now costs no more.
  // HNSW: FAISS's walk returns at most efSearch items, so efSearch starts at
  // the first candidate count and a rung of c candidates searches with
  // efSearch at least c (that is its default then, as the cost counts it).
  // Flat: one row at knob 0 (the index's defaults: there are none), which
  // stops at the fewest candidates reaching the target (the cost grows
  // with the candidates alone) or where a doubling gains nothing.
  int knob = flat ? 0 : ivf ? 1 : std::max<int>(static_knobs.ef_search, int(first_candidates));
  const int last = flat ? 0 : ivf ? int(shape.ivf_lists) : kMaxFitEfSearch;
  knob = std::min(knob, last);
  // From this knob on, a doubling that gains nothing ends the ladder.
  const int steady = std::min(ivf ? static_knobs.nprobe : knob, last);
  auto knobs_of = [&](int value) {
    index::CoarseSearchKnobs knobs;
    if (ivf) {
      knobs.nprobe = value;
    } else if (!flat) {
      knobs.ef_search = value;
    }
    return knobs;
  };
  int64_t reached = -1;  // the cheapest rung at the target
  std::vector<std::pair<int64_t, double>> previous;  // the last row at or above `steady`
  while (true) {
    const index::CoarseSearchKnobs knobs = knobs_of(knob);
    if (reached >= 0 &&
        DefaultSearchCost(shape, n, knobs, first_candidates) >= fit->rungs[size_t(reached)].cost) {
      break;
    }
    std::vector<std::pair<int64_t, double>> row;
    for (int64_t c = first_candidates;; c = std::min(2 * c, last_candidates)) {
      FitRung rung;
      rung.knobs = knobs;
      if (!ivf && !flat) rung.knobs.ef_search = std::max<int>(knob, int(c));
      rung.candidates = c;
      rung.cost = DefaultSearchCost(shape, n, rung.knobs, c);
      HEDGEDB_RETURN_IF_ERROR(recall_at(rung.knobs, c, &rung.recall));
      if (rung.recall >= kTargetFinalRecall &&
          (reached < 0 || rung.cost < fit->rungs[size_t(reached)].cost)) {
        reached = int64_t(fit->rungs.size());
      }
      fit->rungs.push_back(rung);
      const bool gained = row.empty() || rung.recall - row.back().second >= kMinDoublingGain;
      row.emplace_back(c, rung.recall);
      if (rung.recall >= kTargetFinalRecall || !gained || c >= last_candidates) break;
    }
    if (row.front().second >= kTargetFinalRecall || knob >= last) break;
    if (knob >= steady) {
      if (!previous.empty()) {
        double gain = -1;
        for (size_t i = 0; i < std::min(row.size(), previous.size()); ++i) {
          gain = std::max(gain, row[i].second - previous[i].second);
        }
        if (gain < kMinDoublingGain) break;
      }
      previous = std::move(row);
    }
    knob = std::min(2 * knob, last);
  }
  // Nothing reached the target: the cheapest rung within a doubling's gain
  // of the best recall measured.
  const FitRung* chosen = reached >= 0 ? &fit->rungs[size_t(reached)] : nullptr;
  if (!chosen) {
    double top = 0;
    for (const FitRung& r : fit->rungs) top = std::max(top, r.recall);
    for (const FitRung& r : fit->rungs) {
      if (r.recall >= top - kMinDoublingGain && (!chosen || r.cost < chosen->cost)) chosen = &r;
    }
  }
  fit->fitted = true;
  fit->knobs = chosen->knobs;
  fit->candidates = chosen->candidates;
  fit->oversampling = int((chosen->candidates + defaults.k - 1) / defaults.k);
  fit->recall = chosen->recall;
  return Status::OK();
}

Status FitDefaultSearch(const CollectionSpec& spec, const index::CoarseIndex& index,
                        const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids,
                        SearchFit* fit) {
  const auto start = std::chrono::steady_clock::now();
  *fit = SearchFit();
  const int64_t n = int64_t(ids.size());
  const index::FactoryShape& shape = index.shape();
  if (!index.fits_default_search() || !index.is_trained() || n < 2) return Status::OK();
  const SearchOptions defaults;
  const int64_t k = std::min<int64_t>(defaults.k, n - 1);

  // The queries: up to kFitQueries items evenly spread over the rows, as
  // float rows (widened from a compact row format, as a search's query).
  const RowShape shape_of_rows = RowShapeOf(spec);
  const int64_t nq = std::min<int64_t>(kFitQueries, n);
  // Each query leaves itself out (its truth and its candidates are the
  // other items): searches ask for items the collection does not hold as
  // often as for its own, and an item is always its own best match and
  // stage 1's nearest vector, which would lift the estimate by up to 1/k
  // for free (at 1M clustered items: 0.990 with itself, where queries not
  // in the collection found 0.976).
  std::vector<int64_t> picked(static_cast<size_t>(nq)), self(static_cast<size_t>(nq));
  for (int64_t q = 0; q < nq; ++q) {
    picked[size_t(q)] = q * n / nq;
    self[size_t(q)] = ids[size_t(picked[size_t(q)])];
  }
  const size_t floats = shape_of_rows.query_row_size();
  std::vector<float> queries(size_t(nq) * floats, 0.0f);
  WidenRows(shape_of_rows, rows.data(), shape_of_rows.item_row_bytes(), picked.data(), size_t(nq),
            queries.data());
  ScoreParams params;
  HEDGEDB_RETURN_IF_ERROR(ScoreParamsFor(spec, ScoreType::kDefault, 0, false, 0, &params));
  std::vector<std::unordered_set<int64_t>> truth;
  HEDGEDB_RETURN_IF_ERROR(ExactTop(shape_of_rows, params, rows, ids, queries, self, nq, k, &truth));
  int64_t total = 0;
  for (const auto& t : truth) total += int64_t(t.size());

  // A rung's recall: the truth found among each query's c best candidates
  // other than itself (stage 1 asked for one more, as the query takes a
  // slot where the collection holds it).
  std::vector<int64_t> labels;
  const RungRecall recall_at = [&](const index::CoarseSearchKnobs& knobs, int64_t c,
                                   double* recall) {
    const int64_t asked = std::min(c + 1, n);
    HEDGEDB_RETURN_IF_ERROR(index.Search(queries.data(), nq, asked, knobs, &labels));
    int64_t hits = 0;
    for (int64_t q = 0; q < nq; ++q) {
      int64_t taken = 0;
      for (int64_t j = 0; j < asked && taken < c; ++j) {
        const int64_t id = labels[size_t(q * asked + j)];
        if (id == self[size_t(q)]) continue;
        ++taken;
        hits += int64_t(truth[size_t(q)].count(id));
      }
    }
    *recall = total > 0 ? double(hits) / double(total) : 1.0;
    return Status::OK();
  };

  HEDGEDB_RETURN_IF_ERROR(WalkFitLadder(shape, n, index.StaticKnobs(), recall_at, fit));
  if (!fit->fitted) return Status::OK();
  fit->queries = nq;
  // Stage 1's own recall at the chosen knobs, the upkeep's baseline (a
  // flat index has no knob to measure it at, nor an upkeep that checks it).
  if (index.tunable()) {
    std::vector<double> coarse;
    HEDGEDB_RETURN_IF_ERROR(index.MeasureRecall(
        rows.data(), ids.data(), n, int64_t(defaults.k) * 10, 0, {fit->knobs}, &coarse));
    fit->coarse_recall = coarse.empty() ? std::numeric_limits<double>::quiet_NaN() : coarse.front();
  }
  fit->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::OK();
}

}  // namespace query
}  // namespace hedgedb
