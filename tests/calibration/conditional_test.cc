// The uncertainty- and rank-conditional calibration map (Method::kConditional,
// docs/calibration.md, "Conditional maps"): on synthetic pairs whose true
// match probability depends on the query's and the item's eta, or on the
// rank, the fitted map recovers it within every eta quartile and at the top
// of each ranking, where the unconditional map does not; the map is
// monotone in score, encodes and decodes, and maps of version 1 still decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "calibration/calibration_map.h"
#include "calibration/fit.h"
#include "calibration/logistic.h"
#include "calibration/metrics.h"
#include "calibration/report.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "hedgedb/calibration.h"
#include "version_one_map.h"

namespace hedgedb {
namespace calibration {
namespace {

// Pairs of queries against `items` items each. eta of queries and items is
// uniform in [0.02, 0.5]; t = logit(score) ~ N(-1, 2^2); the truth is
//   logit P(match) = -2.5 - 0.3 lq + 1.2 t - 0.25 t lq - 0.3 li
// with lq, li the logits of the query's and the item's eta: an uncertain
// query's scores say less (slope 0.6 at eta 0.5, 1.6 at eta 0.02), and its
// matches are rarer. Base rate ~17%. Each query's pairs are ranked by score.
struct EtaPairs {
  std::vector<ScoredPair> pairs;
  std::vector<double> truth;  // P(match) of each pair
};

// One query's pairs with their true probabilities: ranked by score as a
// search ranks them (rank and next score set), then appended to *out.
void AppendRanked(std::vector<std::pair<ScoredPair, double>> rows, EtaPairs* out) {
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first.score > b.first.score; });
  QueryPairs qp;
  for (const auto& row : rows) qp.pairs.push_back(row.first);
  RankQueryPairs(&qp, 0);
  for (size_t j = 0; j < rows.size(); ++j) {
    out->pairs.push_back(qp.pairs[j]);
    out->truth.push_back(rows[j].second);
  }
}

EtaPairs SampleEtaPairs(int queries, int items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> eta(0.02, 0.5), unit(0, 1);
  std::normal_distribution<double> t(-1, 2);
  EtaPairs out;
  for (int q = 0; q < queries; ++q) {
    const double eq = eta(rng), lq = Logit(eq);
    std::vector<std::pair<ScoredPair, double>> rows;
    for (int j = 0; j < items; ++j) {
      const double ei = eta(rng), li = Logit(ei), tj = t(rng);
      const double p = Sigmoid(-2.5 - 0.3 * lq + 1.2 * tj - 0.25 * tj * lq - 0.3 * li);
      ScoredPair pair{Sigmoid(tj), unit(rng) < p};
      pair.query = q;
      pair.context.query_eta = float(eq);
      pair.context.item_eta = float(ei);
      rows.push_back({pair, p});
    }
    AppendRanked(std::move(rows), &out);
  }
  return out;
}

// The same pairs as an unconditional fit sees them: no context.
std::vector<ScoredPair> WithoutContext(std::vector<ScoredPair> pairs) {
  for (ScoredPair& p : pairs) p.context = PairContext();
  return pairs;
}

double Ece(const std::vector<ScoredPair>& predictions) {
  CalibrationMetrics m;
  EXPECT_TRUE(MeasureCalibration(predictions, &m).ok());
  return m.ece;
}

// ECE of the map's probabilities on `fresh` within each quartile of the
// query's eta (or, by_item, of the item's).
std::vector<double> EcePerEtaQuartile(const CalibrationMap& map,
                                      const std::vector<ScoredPair>& fresh, bool by_item) {
  std::vector<double> cuts;
  for (const ScoredPair& p : fresh)
    cuts.push_back(by_item ? p.context.item_eta : p.context.query_eta);
  std::sort(cuts.begin(), cuts.end());
  std::vector<double> out;
  for (int g = 0; g < 4; ++g) {
    const double lo = cuts[g * cuts.size() / 4], hi = cuts[(g + 1) * cuts.size() / 4 - 1];
    std::vector<ScoredPair> group;
    for (const ScoredPair& p : fresh) {
      const double e = by_item ? p.context.item_eta : p.context.query_eta;
      if (e < lo || e > hi) continue;
      ScoredPair pred = p;
      pred.score = map.Apply(p.score, &p.context);
      group.push_back(pred);
    }
    out.push_back(Ece(group));
  }
  return out;
}

TEST(ConditionalMapTest, RecoversAnEtaDependentTruthWhereTheUnconditionalMapFails) {
  const EtaPairs train = SampleEtaPairs(4000, 50, 1);  // 200,000 pairs
  const EtaPairs fresh = SampleEtaPairs(4000, 50, 2);
  FitOptions options;
  options.score_type = ScoreType::kMc;
  CalibrationMap conditional, unconditional;
  ASSERT_TRUE(FitCalibration(train.pairs, options, &conditional).ok());
  ASSERT_TRUE(FitCalibration(WithoutContext(train.pairs), options, &unconditional).ok());
  std::printf("conditional fit: %s\nunconditional fit: %s\n", conditional.report.reason.c_str(),
              unconditional.report.reason.c_str());
  // The conditional map wins the held-out comparison by far.
  EXPECT_EQ(conditional.method, Method::kConditional);
  EXPECT_NE(unconditional.method, Method::kConditional);
  EXPECT_TRUE(conditional.ReadsQueryEta());
  EXPECT_TRUE(conditional.ReadsItemEta());

  double error = 0;
  for (size_t i = 0; i < fresh.pairs.size(); ++i) {
    error += std::fabs(conditional.Apply(fresh.pairs[i].score, &fresh.pairs[i].context) -
                       fresh.truth[i]);
  }
  error /= double(fresh.pairs.size());
  std::printf("mean |p - true P| on fresh pairs: %.4f\n", error);
  // About 0.009 with the eta terms of map version 2 (a line in logit eta,
  // which this truth is); the eta knots add three weights that a curved
  // truth needs (CurvedEtaEffectNeedsTheKnots), at a little variance here.
  EXPECT_LT(error, 0.0125);

  double worst_unconditional = 0;
  for (bool by_item : {false, true}) {
    const std::vector<double> c = EcePerEtaQuartile(conditional, fresh.pairs, by_item);
    const std::vector<double> u = EcePerEtaQuartile(unconditional, fresh.pairs, by_item);
    for (int g = 0; g < 4; ++g) {
      std::printf("%s eta quartile %d: ECE conditional %.4f, unconditional %.4f\n",
                  by_item ? "item" : "query", g + 1, c[g], u[g]);
      EXPECT_LE(c[g], 0.02) << (by_item ? "item" : "query") << " quartile " << g + 1;
      worst_unconditional = std::max(worst_unconditional, u[g]);
    }
  }
  // The per-bin check can fail: the map of the score alone fails it.
  EXPECT_GT(worst_unconditional, 0.02);
}

// A curved eta effect, as the quickstart's encoder shows: query eta has a
// narrow bulk and a long tail (logit eta = -4.4 + Exponential(mean 0.6)),
// and how often a query's pairs match falls steeply over the bulk and
// flattens in the tail:
//   logit P(match) = -3.5 + 1.3 t + 2.5 exp(-(lq + 4.4) / 0.5)
// One line in logit eta cannot follow it; the hinges at the quartiles can.
EtaPairs SampleCurvedEtaPairs(int queries, int items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> tail(1 / 0.6);
  std::uniform_real_distribution<double> eta(0.02, 0.5), unit(0, 1);
  std::normal_distribution<double> t(-1, 2);
  EtaPairs out;
  for (int q = 0; q < queries; ++q) {
    const double lq = -4.4 + tail(rng);
    std::vector<std::pair<ScoredPair, double>> rows;
    for (int j = 0; j < items; ++j) {
      const double tj = t(rng);
      const double p = Sigmoid(-3.5 + 1.3 * tj + 2.5 * std::exp(-(lq + 4.4) / 0.5));
      ScoredPair pair{Sigmoid(tj), unit(rng) < p};
      pair.query = q;
      pair.context.query_eta = float(Sigmoid(lq));
      pair.context.item_eta = float(eta(rng));
      rows.push_back({pair, p});
    }
    AppendRanked(std::move(rows), &out);
  }
  return out;
}

// The worst |mean p - match rate| of the top-10 pairs over the quartiles of
// query eta.
double WorstTop10GapByQueryEta(const CalibrationMap& map, const EtaPairs& fresh) {
  std::vector<double> cuts;
  for (const ScoredPair& p : fresh.pairs) cuts.push_back(p.context.query_eta);
  std::sort(cuts.begin(), cuts.end());
  double worst = 0;
  for (int g = 0; g < 4; ++g) {
    const double lo = cuts[g * cuts.size() / 4], hi = cuts[(g + 1) * cuts.size() / 4 - 1];
    double p = 0, hits = 0, n = 0;
    for (const ScoredPair& pair : fresh.pairs) {
      const float e = pair.context.query_eta;
      if (e < lo || e > hi || pair.context.rank > 10) continue;
      p += map.Apply(pair.score, &pair.context);
      hits += pair.is_match ? 1 : 0;
      n += 1;
    }
    std::printf("  query eta quartile %d: %6.0f top-10 pairs, mean p %.4f, match rate %.4f\n",
                g + 1, n, p / n, hits / n);
    worst = std::max(worst, std::fabs(p - hits) / n);
  }
  return worst;
}

TEST(ConditionalMapTest, CurvedEtaEffectNeedsTheKnots) {
  const EtaPairs train = SampleCurvedEtaPairs(4000, 50, 3);
  const EtaPairs fresh = SampleCurvedEtaPairs(4000, 50, 4);
  FitOptions options;
  options.score_type = ScoreType::kMc;
  CalibrationMap knots, line;
  ASSERT_TRUE(FitCalibration(train.pairs, options, &knots).ok());
  options.conditional_eta_knots = false;
  ASSERT_TRUE(FitCalibration(train.pairs, options, &line).ok());
  ASSERT_EQ(knots.method, Method::kConditional);
  EXPECT_EQ(knots.eta_knots.size(), size_t(kEtaKnots));
  EXPECT_TRUE(line.eta_knots.empty());
  std::printf("with the knots:\n");
  const double with_knots = WorstTop10GapByQueryEta(knots, fresh);
  std::printf("a line in logit eta:\n");
  const double with_line = WorstTop10GapByQueryEta(line, fresh);
  // About 10,000 top-10 pairs a quartile: a standard error of about 0.005.
  // The knots cut the worst gap (0.07-0.08 with a line) to within 0.03; the
  // rest is the curvature inside the first quartile.
  EXPECT_LE(with_knots, 0.03);
  EXPECT_GT(with_line, 0.06);
  // The knots survive encoding.
  CalibrationMap decoded;
  ASSERT_TRUE(CalibrationMap::Decode(knots.Encode(), &decoded).ok());
  EXPECT_EQ(decoded.eta_knots, knots.eta_knots);
  PairContext context = fresh.pairs[0].context;
  EXPECT_EQ(decoded.Apply(0.9, &context), knots.Apply(0.9, &context));
  // Beyond the most uncertain query of the fit, a head result's
  // probability keeps falling with eta (here the last segment falls) and
  // never rises.
  context.rank = 1;
  const double edge = knots.input_hi[kInputQueryEta];
  ASSERT_LT(HeadEtaSlope(knots, kEtaKnots), 0);
  context.query_eta = float(Sigmoid(edge + 0.5));
  const double near = knots.Apply(0.9, &context);
  context.query_eta = float(Sigmoid(edge + 2));
  EXPECT_LT(knots.Apply(0.9, &context), near);
}

// One match per query among `items`: match scores ~ N(1.5, 1), the others
// ~ N(0, 1) (l2-like, unbounded). The best-ranked item is likelier a match
// than another pair of the same score: it beat every other candidate.
std::vector<QueryPairs> SampleRankedQueries(int queries, int items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<QueryPairs> out(static_cast<size_t>(queries));
  for (QueryPairs& qp : out) {
    for (int j = 0; j < items; ++j) {
      const bool match = j == 0;
      qp.pairs.push_back({normal(rng) + (match ? 1.5 : 0.0), match});
    }
    std::sort(qp.pairs.begin(), qp.pairs.end(),
              [](const ScoredPair& a, const ScoredPair& b) { return a.score > b.score; });
    RankQueryPairs(&qp, 0);
  }
  return out;
}

// Calibration of the pairs ranked at most max_rank: ECE, and mean
// probability minus the fraction of matches.
struct TopCalibration {
  double ece = 0, gap = 0;
};

TopCalibration AtTop(const CalibrationMap& map, const std::vector<QueryPairs>& queries,
                     int max_rank, bool with_context) {
  std::vector<ScoredPair> top;
  double gap = 0;
  for (const QueryPairs& qp : queries) {
    for (const ScoredPair& p : qp.pairs) {
      if (p.context.rank > max_rank) continue;
      ScoredPair pred = p;
      pred.score = map.Apply(p.score, with_context ? &p.context : nullptr);
      gap += pred.score - (p.is_match ? 1 : 0);
      top.push_back(pred);
    }
  }
  return {Ece(top), gap / double(top.size())};
}

TEST(ConditionalMapTest, OneMapIsCalibratedAtEveryDepthOfTheRanking) {
  const std::vector<QueryPairs> train = SampleRankedQueries(4000, 50, 3);
  const std::vector<QueryPairs> fresh = SampleRankedQueries(20000, 50, 4);
  std::vector<ScoredPair> pairs;
  for (size_t q = 0; q < train.size(); ++q) {
    for (ScoredPair p : train[q].pairs) {
      p.query = int32_t(q);
      pairs.push_back(p);
    }
  }
  FitOptions options;
  options.score_type = ScoreType::kL2;
  CalibrationMap conditional, unconditional;
  ASSERT_TRUE(FitCalibration(pairs, options, &conditional).ok());
  ASSERT_TRUE(FitCalibration(WithoutContext(pairs), options, &unconditional).ok());
  std::printf("conditional fit: %s\n", conditional.report.reason.c_str());
  EXPECT_EQ(conditional.method, Method::kConditional);
  EXPECT_FALSE(conditional.ReadsQueryEta());
  for (int depth : {1, 10, 50}) {
    const TopCalibration c = AtTop(conditional, fresh, depth, true);
    const TopCalibration u = AtTop(unconditional, fresh, depth, false);
    std::printf("top-%d: ECE %.4f (score alone %.4f), mean p - matches %+.4f (%+.4f)\n", depth,
                c.ece, u.ece, c.gap, u.gap);
    EXPECT_LE(c.ece, depth == 1 ? 0.025 : 0.02) << "top-" << depth;
    EXPECT_LE(std::fabs(c.gap), 0.01) << "top-" << depth;
    if (depth == 1) {
      // The score alone under-rates the best match.
      EXPECT_LT(u.gap, -0.03);
    }
  }
}

// A conditional map fitted on EtaPairs.
CalibrationMap SmallConditionalMap() {
  const EtaPairs train = SampleEtaPairs(400, 50, 5);
  FitOptions options;
  options.score_type = ScoreType::kMc;
  CalibrationMap map;
  EXPECT_TRUE(FitConditional(train.pairs, options, &map).ok());
  return map;
}

TEST(ConditionalMapTest, MonotoneInScoreAndGapForAnyContext) {
  const CalibrationMap map = SmallConditionalMap();
  ASSERT_TRUE(map.Validate().ok());
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    PairContext c;
    c.rank = 1 + int32_t(rng() % 200);
    c.next_score = float(unit(rng) * 0.5);
    c.query_eta = float(unit(rng));
    c.item_eta = float(unit(rng));
    double last = 0;
    for (double s = 0.5; s <= 1.0; s += 0.01) {  // above next_score: a valid gap
      const double p = map.Apply(s, &c);
      ASSERT_GE(p, last - 1e-12) << "score " << s;
      ASSERT_TRUE(p >= 0 && p <= 1);
      last = p;
    }
  }
  // Unknown context: the fit's means stand in; NaN score: the base rate.
  EXPECT_TRUE(std::isfinite(map.Apply(0.7)));
  EXPECT_DOUBLE_EQ(map.Apply(std::nan("")), map.base_rate);
}

TEST(ConditionalMapTest, EncodesDecodesAndRejectsDamage) {
  CalibrationMap map = SmallConditionalMap();
  ASSERT_EQ(map.method, Method::kConditional);
  const std::string bytes = map.Encode();
  CalibrationMap back;
  ASSERT_TRUE(CalibrationMap::Decode(bytes, &back).ok());
  EXPECT_EQ(back.features, map.features);
  PairContext c;
  c.rank = 3;
  c.next_score = 0.2f;
  c.query_eta = 0.3f;
  c.item_eta = 0.1f;
  EXPECT_EQ(back.Apply(0.4, &c), map.Apply(0.4, &c));
  EXPECT_TRUE(back.Info().conditional);
  EXPECT_NE(back.Info().conditioned_on.find("query eta"), std::string::npos);
  // Every truncation and single-byte change is refused.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x20;
    EXPECT_FALSE(CalibrationMap::Decode(bad, &back).ok()) << "byte " << i;
    EXPECT_FALSE(CalibrationMap::Decode(bytes.substr(0, i), &back).ok()) << "length " << i;
  }
  // A map whose log-odds fall with the score is not a valid map.
  CalibrationMap falling = map;
  for (size_t j = 0; j < falling.params.size() - 1; ++j) falling.params[j] = 0;
  falling.params[0] = -1;  // the first used feature is the score
  ASSERT_TRUE(falling.features & 1u);
  EXPECT_FALSE(falling.Validate().ok());
  // Inputs out of their own range are refused.
  CalibrationMap range = map;
  range.input_mean[kInputScore] = range.input_hi[kInputScore] + 1;
  EXPECT_FALSE(range.Validate().ok());
}

TEST(ConditionalMapTest, VersionOneMapsDecodeAsUnconditional) {
  const std::string v1 = testing::VersionOnePlattMap(1.3, -3.5, 0.05);
  CalibrationMap map;
  Status s = CalibrationMap::Decode(v1, &map);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(map.method, Method::kPlatt);
  EXPECT_FALSE(map.Info().conditional);
  EXPECT_EQ(map.sequence, 7u);
  PairContext c;
  c.rank = 1;
  c.query_eta = 0.4f;  // ignored by an unconditional map
  EXPECT_NEAR(map.Apply(0.8, &c), Sigmoid(1.3 * Logit(0.8) - 3.5), 1e-12);
  // Re-encoded, it is a version-2 map with the same content.
  CalibrationMap again;
  ASSERT_TRUE(CalibrationMap::Decode(map.Encode(), &again).ok());
  EXPECT_EQ(GetFixed<uint16_t>(map.Encode().data() + 4), kCalibrationMapVersion);
  EXPECT_EQ(again.Apply(0.8), map.Apply(0.8));
}

// A map as version 2 wrote it: version 3's encoding of a map without eta
// knots and held-out pairs, less that section (u32 0 knots, u32 0 counts,
// u32 0 moments, f64 nn, f64 queries: 28 bytes before the fit report).
std::string AsVersionTwo(const CalibrationMap& map) {
  std::string bytes = map.Encode();
  size_t report = 1 + 8 + 1 + 3 * 8 + 4 + 25 * map.report.candidates.size() + 4 +
                  map.report.reason.size();
  const size_t end = bytes.size() - 4 - report;  // the section ends here
  bytes.erase(end - 28, 28);
  bytes.resize(bytes.size() - 4);  // the checksum
  std::string field;
  PutFixed<uint16_t>(&field, 2);
  bytes.replace(4, 2, field);
  field.clear();
  PutFixed<uint32_t>(&field, uint32_t(bytes.size() + 4));
  bytes.replace(6, 4, field);
  PutFixed<uint32_t>(&bytes, Crc32c(bytes.data(), bytes.size()));
  return bytes;
}

TEST(ConditionalMapTest, VersionTwoMapsDecodeWithoutKnotsOrFalseMatchCounts) {
  CalibrationMap map = SmallConditionalMap();
  map.eta_knots.clear();
  map.false_match_counts.clear();
  ASSERT_TRUE(map.Validate().ok());
  const std::string v2 = AsVersionTwo(map);
  EXPECT_EQ(GetFixed<uint16_t>(v2.data() + 4), 2);
  CalibrationMap back;
  Status s = CalibrationMap::Decode(v2, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(back.conditional());
  EXPECT_TRUE(back.eta_knots.empty());
  double tau = 0;
  EXPECT_TRUE(back.FalseMatchThreshold(0.01, 0.95, &tau).IsInvalidArgument());
  PairContext c;
  c.rank = 2;
  c.query_eta = 0.2f;
  c.item_eta = 0.1f;
  EXPECT_EQ(back.Apply(0.7, &c), map.Apply(0.7, &c));
  // A damaged version-2 map is still refused.
  std::string bad = v2;
  bad[20] ^= 1;
  EXPECT_TRUE(CalibrationMap::Decode(bad, &back).IsCorruption());
}

TEST(ConditionalMapTest, PublicFitTakesTheContext) {
  const EtaPairs train = SampleEtaPairs(1000, 50, 8);
  const size_t n = train.pairs.size();
  std::vector<double> scores(n);
  std::vector<uint8_t> same(n);
  std::vector<int64_t> query(n);
  std::vector<int32_t> rank(n);
  std::vector<float> next(n), qeta(n), ieta(n);
  for (size_t i = 0; i < n; ++i) {
    const ScoredPair& p = train.pairs[i];
    scores[i] = p.score;
    same[i] = p.is_match;
    query[i] = 1000 + p.query;  // any ids
    rank[i] = p.context.rank;
    next[i] = p.context.next_score;
    qeta[i] = p.context.query_eta;
    ieta[i] = p.context.item_eta;
  }
  CalibrationPairs in;
  in.scores = scores.data();
  in.same_label = same.data();
  in.n = int64_t(n);
  in.query = query.data();
  in.rank = rank.data();
  in.next_score = next.data();
  in.query_eta = qeta.data();
  in.item_eta = ieta.data();
  std::string bytes;
  CalibrationInfo info;
  Status s = FitCalibrationMap(ScoreType::kMc, in, 0, &bytes, &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(info.conditional);
  EXPECT_EQ(info.method, "conditional");
  // Without ranks the same pairs give an unconditional map.
  in.rank = nullptr;
  ASSERT_TRUE(FitCalibrationMap(ScoreType::kMc, in, 0, &bytes, &info).ok());
  EXPECT_FALSE(info.conditional);
  // A rank below 1 is refused, naming the pair.
  in.rank = rank.data();
  rank[5] = 0;
  s = FitCalibrationMap(ScoreType::kMc, in, 0, &bytes, &info);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("pair 5"), std::string::npos) << s.ToString();
  // One class: refused as before.
  std::fill(same.begin(), same.end(), 0);
  rank[5] = 1;
  s = FitCalibrationMap(ScoreType::kMc, in, 0, &bytes, &info);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("only one class"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb

namespace hedgedb {
namespace calibration {
namespace {

// The conformal score of one query as FitAndReport computes it: the best
// probability the map gives a same-label item (-1: none ranked).
double ConformalScore(const CalibrationMap& map, const QueryPairs& qp) {
  double best = -1;
  for (const ScoredPair& p : qp.pairs) {
    if (p.is_match) best = std::max(best, map.Apply(p.score, &p.context));
  }
  return best;
}

// Split conformal over 200 seeds: a map fitted once, 500 conformal queries
// and 2,000 fresh ones per seed. A query is covered when its set (the items
// of probability >= the threshold) holds its match. Averaged over the seeds,
// coverage lies in the finite-sample band [1 - alpha, 1 - alpha + 1/(n+1)]
// up to the spread of 200 seeds.
TEST(ConformalTest, CoverageHoldsOverManySeeds) {
  std::vector<ScoredPair> pairs;
  const std::vector<QueryPairs> train = SampleRankedQueries(2000, 50, 100);
  for (size_t q = 0; q < train.size(); ++q) {
    for (ScoredPair p : train[q].pairs) {
      p.query = int32_t(q);
      pairs.push_back(p);
    }
  }
  FitOptions options;
  options.score_type = ScoreType::kL2;
  CalibrationMap map;
  ASSERT_TRUE(FitCalibration(pairs, options, &map).ok());
  for (double coverage : {0.9, 0.8}) {
    double sum = 0, sum_size = 0;
    int below = 0;
    const int seeds = 200;
    for (int seed = 0; seed < seeds; ++seed) {
      CalibrationMap m = map;
      m.conformal_scores.clear();
      for (const QueryPairs& qp : SampleRankedQueries(500, 50, 1000 + seed)) {
        m.conformal_scores.push_back(ConformalScore(m, qp));
      }
      std::sort(m.conformal_scores.begin(), m.conformal_scores.end());
      double tau = 0;
      ASSERT_TRUE(m.ConformalThreshold(coverage, &tau).ok());
      int covered = 0;
      int64_t size = 0;
      const std::vector<QueryPairs> fresh = SampleRankedQueries(2000, 50, 5000 + seed);
      for (const QueryPairs& qp : fresh) {
        bool hit = false;
        for (const ScoredPair& p : qp.pairs) {
          if (m.Apply(p.score, &p.context) < tau) continue;
          ++size;
          hit = hit || p.is_match;
        }
        covered += hit ? 1 : 0;
      }
      const double c = double(covered) / double(fresh.size());
      sum += c;
      sum_size += double(size) / double(fresh.size());
      below += c < coverage - 0.04 ? 1 : 0;
    }
    const double mean = sum / seeds;
    std::printf("coverage %.2f: mean measured %.4f over %d seeds (band [%.4f, %.4f]), mean set "
                "size %.2f, %d seeds below %.2f\n",
                coverage, mean, seeds, coverage, coverage + 1.0 / 501, sum_size / seeds, below,
                coverage - 0.04);
    EXPECT_GE(mean, coverage - 0.005);
    EXPECT_LE(mean, coverage + 1.0 / 501 + 0.005);
    EXPECT_LE(below, 6);  // a seed's own coverage rarely strays (sd ~0.016)
  }
}

TEST(ConformalTest, ThresholdIsTheFiniteSampleQuantileAndBadInputIsRefused) {
  CalibrationMap map;
  map.params = {1, 0};
  double tau = 0;
  Status s = map.ConformalThreshold(0.9, &tau);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("conformal"), std::string::npos) << s.ToString();
  // 19 scores 0.05, 0.10, ..., 0.95: alpha = 0.1 -> j = floor(0.1 x 20) = 2.
  for (int i = 1; i <= 19; ++i) map.conformal_scores.push_back(0.05 * i);
  ASSERT_TRUE(map.Validate().ok());
  ASSERT_TRUE(map.ConformalThreshold(0.9, &tau).ok());
  EXPECT_DOUBLE_EQ(tau, 0.10);
  ASSERT_TRUE(map.ConformalThreshold(0.5, &tau).ok());  // j = 10
  EXPECT_DOUBLE_EQ(tau, 0.50);
  for (double bad : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    s = map.ConformalThreshold(bad, &tau);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("(0, 1)"), std::string::npos) << s.ToString();
  }
  // 0.99 needs floor(0.01 (n + 1)) >= 1: n >= 99.
  s = map.ConformalThreshold(0.99, &tau);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("at least 99 conformal queries, the calibration has 19"),
            std::string::npos)
      << s.ToString();
  // 0.9 needs 9.
  map.conformal_scores.resize(8);
  s = map.ConformalThreshold(0.9, &tau);
  EXPECT_NE(s.message().find("at least 9 conformal"), std::string::npos) << s.ToString();
  map.conformal_scores.push_back(0.9);
  EXPECT_TRUE(map.ConformalThreshold(0.9, &tau).ok());
  // Encoded with the map; unsorted or out-of-range scores are not valid.
  CalibrationMap back;
  ASSERT_TRUE(CalibrationMap::Decode(map.Encode(), &back).ok());
  EXPECT_EQ(back.conformal_scores, map.conformal_scores);
  EXPECT_EQ(back.Info().conformal_queries, 9);
  std::swap(map.conformal_scores[0], map.conformal_scores[1]);
  EXPECT_FALSE(map.Validate().ok());
  map.conformal_scores = {-1, 0.5, 1.5};
  EXPECT_FALSE(map.Validate().ok());
}

TEST(ConformalTest, ByEtaUsesTheQuerysQuartile) {
  CalibrationMap map;
  map.params = {1, 0};
  // 40 conformal queries: eta i / 40, score 0.5 + i / 100 (ascending both):
  // quartile k holds scores 0.5 + (10k .. 10k + 9) / 100.
  for (int i = 0; i < 40; ++i) {
    map.conformal_scores.push_back(0.5 + i / 100.0);
    map.conformal_eta.push_back(i / 40.0);
  }
  ASSERT_TRUE(map.Validate().ok());
  double tau = 0;
  // Quartile 3 (eta 0.5 .. 0.725): 10 scores 0.70 .. 0.79; alpha = 0.1 ->
  // j = floor(0.1 x 11) = 1: the smallest, 0.70.
  ASSERT_TRUE(map.ConformalThresholdByEta(0.9, 0.6, &tau).ok());
  EXPECT_DOUBLE_EQ(tau, 0.70);
  ASSERT_TRUE(map.ConformalThresholdByEta(0.9, 0.0, &tau).ok());
  EXPECT_DOUBLE_EQ(tau, 0.50);
  ASSERT_TRUE(map.ConformalThresholdByEta(0.9, 5.0, &tau).ok());  // beyond: the last quartile
  EXPECT_DOUBLE_EQ(tau, 0.80);
  // 10 per quartile cannot give 0.95 (needs 19), and the message says where.
  Status s = map.ConformalThresholdByEta(0.95, 0.6, &tau);
  EXPECT_NE(s.message().find("at least 19 conformal queries in quartile 3 of eta"),
            std::string::npos)
      << s.ToString();
  EXPECT_TRUE(map.ConformalThresholdByEta(0.9, std::nan(""), &tau).IsInvalidArgument());
  CalibrationMap back;
  ASSERT_TRUE(CalibrationMap::Decode(map.Encode(), &back).ok());
  EXPECT_EQ(back.conformal_eta, map.conformal_eta);
  map.conformal_eta.pop_back();
  EXPECT_FALSE(map.Validate().ok());
  map.conformal_eta.clear();  // no eta: sets by eta are refused
  EXPECT_TRUE(map.ConformalThresholdByEta(0.9, 0.3, &tau).IsInvalidArgument());
}

// FitAndReport keeps the conformal queries out of the fit and stores their
// scores with the map.
TEST(ConformalTest, FitAndReportStoresTheScoresOfQueriesItDidNotFit) {
  const std::vector<QueryPairs> queries = SampleRankedQueries(1000, 50, 77);
  CalibrationMap map;
  CalibrationReport report;
  ASSERT_TRUE(FitAndReport(ScoreType::kL2, 3, true, 0.3, queries, &map, &report).ok());
  EXPECT_EQ(map.conformal_scores.size(), 300u);
  EXPECT_EQ(report.queries, 700);
  EXPECT_EQ(map.num_pairs, 700 * 50);
  EXPECT_EQ(report.info.conformal_queries, 300);
  EXPECT_TRUE(std::is_sorted(map.conformal_scores.begin(), map.conformal_scores.end()));
  EXPECT_TRUE(FitAndReport(ScoreType::kL2, 3, true, 1.0, queries, &map, &report)
                  .IsInvalidArgument());
  EXPECT_TRUE(FitAndReport(ScoreType::kL2, 3, true, 0.0001, queries, &map, &report)
                  .IsInvalidArgument());
}

}  // namespace
}  // namespace calibration
}  // namespace hedgedb
