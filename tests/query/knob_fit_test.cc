// The ladder of the default search's fit (query/knob_fit.h, WalkFitLadder)
// on given recall curves: IVF's nprobe starts at one list, so clustered data
// that reaches the target with few lists is fitted below the static nprobe;
// below the static nprobe a doubling that gains little does not end the
// ladder (unclustered data, where few lists hold little of the truth, still
// climbs to the lists it needs); from the static nprobe up, a doubling that
// gains nothing ends it as before; HNSW's efSearch ladder starts where it did;
// a flat index's ladder is the candidates alone.
#include "query/knob_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

namespace hedgedb {
namespace query {
namespace {

// An IVF1024 over 1M items: static nprobe max(8, 1024 / 64) = 16.
constexpr int64_t kLists = 1024;
constexpr int64_t kItems = 1000000;
constexpr int kStaticNprobe = 16;

index::FactoryShape Ivf() {
  index::FactoryShape shape;
  shape.ivf_lists = kLists;
  return shape;
}

index::CoarseSearchKnobs StaticIvf() {
  index::CoarseSearchKnobs knobs;
  knobs.nprobe = kStaticNprobe;
  return knobs;
}

// Fits on the recall curve `curve(nprobe or efSearch, candidates)`, keeping
// every (knob, candidates) measured.
template <typename Curve>
SearchFit Fit(const index::FactoryShape& shape, const index::CoarseSearchKnobs& static_knobs,
              Curve curve, std::map<std::pair<int, int64_t>, double>* measured = nullptr) {
  SearchFit fit;
  const RungRecall recall_at = [&](const index::CoarseSearchKnobs& knobs, int64_t c,
                                   double* recall) {
    const int knob = shape.ivf_lists > 0 ? knobs.nprobe : knobs.ef_search;
    *recall = curve(knob, c);
    if (measured) (*measured)[{knob, c}] = *recall;
    return Status::OK();
  };
  EXPECT_TRUE(WalkFitLadder(shape, kItems, static_knobs, recall_at, &fit).ok());
  return fit;
}

// Clustered data: each doubling of the lists or of the candidates halves
// what is missed (nprobe 1, 100 candidates: 0.94).
double Clustered(int nprobe, int64_t candidates) {
  return 1.0 - 0.06 / (double(nprobe) * double(candidates) / 100.0);
}

TEST(FitLadderTest, ClusteredDataFitsFewerListsThanTheStaticKnob) {
  std::map<std::pair<int, int64_t>, double> measured;
  const SearchFit fit = Fit(Ivf(), StaticIvf(), Clustered, &measured);
  ASSERT_TRUE(fit.fitted);
  // nprobe 8 with 100 candidates finds 0.9925: the cheapest pair at the
  // target (nprobe 4 needs 200 candidates, which cost more than 4 more
  // lists); the static nprobe 16 was the old ladder's first rung.
  EXPECT_EQ(fit.knobs.nprobe, 8);
  EXPECT_LT(fit.knobs.nprobe, kStaticNprobe);
  EXPECT_EQ(fit.candidates, 100);
  EXPECT_EQ(fit.oversampling, 10);
  EXPECT_EQ(fit.recall, Clustered(fit.knobs.nprobe, fit.candidates));
  EXPECT_EQ(measured.begin()->first, std::make_pair(1, int64_t(100)));  // the first rung
  // It stopped there: the target at the fewest candidates.
  EXPECT_EQ(measured.rbegin()->first.first, 8);
  for (const FitRung& r : fit.rungs) {
    if (r.recall >= kTargetFinalRecall) {
      EXPECT_GE(r.cost, fit.rungs.back().cost);
    }
  }
}

// Data without clusters: the truth spreads evenly over the lists, so
// nprobe lists hold nprobe / nlist of it whatever the candidates. A
// doubling from 1 to 2 lists gains 0.001, under kMinDoublingGain.
double Unclustered(int nprobe, int64_t) { return double(nprobe) / double(kLists); }

TEST(FitLadderTest, UnclusteredDataClimbsPastTheStaticKnob) {
  const SearchFit fit = Fit(Ivf(), StaticIvf(), Unclustered);
  ASSERT_TRUE(fit.fitted);
  EXPECT_EQ(fit.knobs.nprobe, int(kLists));
  EXPECT_EQ(fit.recall, 1.0);
  EXPECT_EQ(fit.candidates, 100);
}

// The candidates limit (the coarse order is not the score's): more lists
// gain nothing anywhere, and no pair reaches the target (0.95 at 100
// candidates, 0.006 more per doubling). Below the static knob the ladder
// goes on; from there a doubling that gains nothing ends it, as when it
// started there.
double CandidatesLimit(int, int64_t candidates) {
  return 0.95 + 0.006 * std::log2(double(candidates) / 100.0);
}

TEST(FitLadderTest, ADoublingThatGainsNothingEndsTheLadderFromTheStaticKnob) {
  std::map<std::pair<int, int64_t>, double> measured;
  const SearchFit fit = Fit(Ivf(), StaticIvf(), CandidatesLimit, &measured);
  ASSERT_TRUE(fit.fitted);
  EXPECT_EQ(measured.rbegin()->first.first, 2 * kStaticNprobe);
  for (int nprobe = 1; nprobe <= 2 * kStaticNprobe; nprobe *= 2) {
    EXPECT_EQ(measured.count({nprobe, 1600}), 1u) << nprobe;
  }
  // Nothing reached the target: the cheapest within a doubling's gain of
  // the best (0.974 at 1,600 candidates), the fewest lists.
  EXPECT_EQ(fit.knobs.nprobe, 1);
  EXPECT_EQ(fit.candidates, 1600);
}

// HNSW: efSearch starts at the first candidate count (at least the static
// 64), as before; each doubling of efSearch halves what is missed.
TEST(FitLadderTest, HnswStartsAtTheFirstCandidateCount) {
  index::FactoryShape shape;
  shape.hnsw_m = 32;
  index::CoarseSearchKnobs static_knobs;
  static_knobs.ef_search = 64;
  std::map<std::pair<int, int64_t>, double> measured;
  const SearchFit fit = Fit(
      shape, static_knobs, [](int ef, int64_t) { return 1.0 - 7.9 / ef; }, &measured);
  ASSERT_TRUE(fit.fitted);
  EXPECT_EQ(measured.begin()->first, std::make_pair(100, int64_t(100)));
  EXPECT_EQ(fit.knobs.ef_search, 800);  // 0.99
  EXPECT_EQ(fit.candidates, 100);
}

// A flat index (no lists, no graph) has no knob: one row along the
// candidates, from k x 10 doubling, ending at the fewest that reach the
// target; its cost is every vector plus the candidates' rescoring.
TEST(FitLadderTest, FlatFitsTheCandidatesAlone) {
  const index::FactoryShape flat;
  std::map<std::pair<int, int64_t>, double> measured;
  // Each doubling of the candidates halves what is missed (100: 0.92).
  const SearchFit fit = Fit(
      flat, index::CoarseSearchKnobs(),
      [](int knob, int64_t c) { return knob == 0 ? 1.0 - 8.0 / double(c) : 0.0; }, &measured);
  ASSERT_TRUE(fit.fitted);
  EXPECT_EQ(fit.knobs.nprobe, 0);
  EXPECT_EQ(fit.knobs.ef_search, 0);
  EXPECT_EQ(fit.candidates, 800);  // 0.99
  EXPECT_EQ(fit.oversampling, 80);
  EXPECT_DOUBLE_EQ(fit.recall, 0.99);
  std::vector<int64_t> ladder;
  for (const auto& m : measured) ladder.push_back(m.first.second);
  EXPECT_EQ(ladder, (std::vector<int64_t>{100, 200, 400, 800}));
  for (const FitRung& r : fit.rungs) {
    EXPECT_DOUBLE_EQ(r.cost, DefaultSearchCost(flat, kItems, r.knobs, r.candidates));
  }
  EXPECT_DOUBLE_EQ(DefaultSearchCost(flat, kItems, {}, 800), double(kItems) + 50.0 * 800);

  // A row that stops gaining before the target: the cheapest rung within a
  // doubling's gain of the best.
  const SearchFit stuck =
      Fit(flat, index::CoarseSearchKnobs(), [](int, int64_t c) { return c >= 200 ? 0.95 : 0.90; });
  ASSERT_TRUE(stuck.fitted);
  EXPECT_EQ(stuck.candidates, 200);
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
