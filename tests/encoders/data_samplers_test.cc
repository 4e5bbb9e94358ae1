#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "encoders/data/batch_samplers.h"

namespace hedgedb {
namespace encoders {
namespace {

// `num_classes` classes with sizes 1, 2, 3, ... cycling up to max_size, items
// interleaved so that a class's items are not contiguous.
std::vector<int64_t> MakeLabels(int num_classes, int max_size) {
  std::vector<int> sizes(num_classes);
  for (int c = 0; c < num_classes; ++c) sizes[c] = 1 + c % max_size;
  std::vector<int64_t> labels;
  for (int round = 0; round < max_size; ++round) {
    for (int c = 0; c < num_classes; ++c) {
      if (round < sizes[c]) labels.push_back(100 + 7 * c);  // non-contiguous label values
    }
  }
  return labels;
}

TEST(SeededRngTest, MatchesTheStandardEngine) {
  // mt19937_64's output is fixed by the standard: its first draw after the
  // default seed 5489 is 14514284786278117030.
  SeededRng rng(5489);
  EXPECT_EQ(rng.NextU64(), 14514284786278117030ULL);
}

TEST(SeededRngTest, UniformIntCoversRangeEvenly) {
  SeededRng rng(1);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const uint64_t v = rng.UniformInt(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (const int c : counts) EXPECT_NEAR(c, 10000, 500);
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.UniformIntInclusive(-2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
  }
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.UniformReal();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(SeededRngTest, DeterministicAndStreamsDiffer) {
  SeededRng a(42), b(42);
  std::vector<int> x(50), y(50);
  for (int i = 0; i < 50; ++i) x[i] = y[i] = i;
  a.Shuffle(&x);
  b.Shuffle(&y);
  EXPECT_EQ(x, y);
  EXPECT_NE(SeededRng::DeriveSeed(42, 1), SeededRng::DeriveSeed(42, 2));
  EXPECT_NE(SeededRng::DeriveSeed(42, 1), SeededRng::DeriveSeed(43, 1));
  std::vector<int> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);  // a permutation
}

TEST(LabelIndexTest, GroupsByLabel) {
  const LabelIndex index({5, 3, 5, 9, 3, 5});
  EXPECT_EQ(index.classes(), (std::vector<int64_t>{3, 5, 9}));
  EXPECT_EQ(index.items(1), (std::vector<int64_t>{0, 2, 5}));
  EXPECT_EQ(index.SlotOf(9), 2);
  EXPECT_EQ(index.SlotOf(4), -1);
}

TEST(HibTwoStreamSamplerTest, BalancedBatchesHavePartnersAndEqualPositivesAndNegatives) {
  const std::vector<int64_t> labels = MakeLabels(40, 6);
  HibSamplerOptions options;
  options.batch_size = 32;
  options.seed = 3;
  std::unique_ptr<HibTwoStreamSampler> sampler;
  ASSERT_TRUE(HibTwoStreamSampler::Create(labels, options, &sampler).ok());
  for (int b = 0; b < 20; ++b) {
    const PairBatch batch = sampler->Next();
    ASSERT_EQ(batch.indices.size(), 32u);
    // Every item's class appears at least twice: each random-stream item
    // brought a partner of its class; singleton classes never appear.
    std::map<int64_t, int> per_class;
    for (const int64_t i : batch.indices) ++per_class[labels[i]];
    for (const auto& [label, count] : per_class) EXPECT_GE(count, 2) << label;
    ASSERT_GE(batch.num_matching_pairs, 16);
    int64_t positives = 0, negatives = 0;
    std::set<std::pair<int32_t, int32_t>> seen;
    for (const BatchPair& pair : batch.pairs) {
      ASSERT_LT(pair.first, pair.second);
      ASSERT_LT(pair.second, 32);
      EXPECT_TRUE(seen.insert({pair.first, pair.second}).second) << "duplicate pair";
      const int64_t a = batch.indices[pair.first];
      const int64_t b2 = batch.indices[pair.second];
      EXPECT_NE(a, b2);
      EXPECT_EQ(pair.match, labels[a] == labels[b2]);
      (pair.match ? positives : negatives)++;
    }
    EXPECT_EQ(positives, batch.num_matching_pairs);
    EXPECT_EQ(negatives, positives);  // balanced
  }
}

TEST(HibTwoStreamSamplerTest, RandomStreamCoversAnEpochAndIsDeterministic) {
  // Eight classes of exactly two items: a batch is 4 random-stream items plus
  // their unique partners (their twins); an epoch is 16 / 4 = 4 batches.
  std::vector<int64_t> labels;
  for (int c = 0; c < 8; ++c) labels.insert(labels.end(), {c, c});
  HibSamplerOptions options;
  options.batch_size = 8;
  options.pair_mode = HibPairMode::kAllPairs;
  options.seed = 11;
  std::unique_ptr<HibTwoStreamSampler> a, b;
  ASSERT_TRUE(HibTwoStreamSampler::Create(labels, options, &a).ok());
  ASSERT_TRUE(HibTwoStreamSampler::Create(labels, options, &b).ok());
  std::vector<int> visits(16, 0);
  for (int i = 0; i < 4; ++i) {  // 4 batches x 4 random-stream items = one epoch of 16
    const PairBatch x = a->Next();
    const PairBatch y = b->Next();
    EXPECT_EQ(x.indices, y.indices);
    ASSERT_EQ(x.pairs.size(), y.pairs.size());
    for (const int64_t item : x.indices) ++visits[item];
    // All pairs: C(8, 2) minus pairs of an item with itself.
    std::map<int64_t, int> copies;
    for (const int64_t item : x.indices) ++copies[item];
    size_t self_pairs = 0;
    for (const auto& [item, n] : copies) self_pairs += n * (n - 1) / 2;
    EXPECT_EQ(x.pairs.size(), 28u - self_pairs);
  }
  // Each item is drawn once by the random stream per epoch and once more as
  // its twin's partner.
  for (int item = 0; item < 16; ++item) EXPECT_EQ(visits[item], 2) << item;
  EXPECT_EQ(a->epoch(), 0);
  a->Next();
  EXPECT_EQ(a->epoch(), 1);

  options.seed = 12;
  std::unique_ptr<HibTwoStreamSampler> c;
  ASSERT_TRUE(HibTwoStreamSampler::Create(labels, options, &c).ok());
  std::unique_ptr<HibTwoStreamSampler> d;
  options.seed = 11;
  ASSERT_TRUE(HibTwoStreamSampler::Create(labels, options, &d).ok());
  EXPECT_NE(c->Next().indices, d->Next().indices);
}

TEST(HibTwoStreamSamplerTest, RejectsUnusableInput) {
  std::unique_ptr<HibTwoStreamSampler> sampler;
  HibSamplerOptions options;
  options.batch_size = 7;
  EXPECT_TRUE(HibTwoStreamSampler::Create({0, 0, 1, 1}, options, &sampler).IsInvalidArgument());
  options.batch_size = 4;
  const Status singletons = HibTwoStreamSampler::Create({0, 1, 2, 3}, options, &sampler);
  EXPECT_TRUE(singletons.IsInvalidArgument());
  EXPECT_NE(singletons.message().find("no class has two items"), std::string::npos);
  options.batch_size = 10;
  EXPECT_TRUE(HibTwoStreamSampler::Create({0, 0, 1, 1}, options, &sampler).IsInvalidArgument());
}

TEST(EpisodeSamplerTest, EpisodesHaveWaysShotsAndDisjointQueries) {
  const std::vector<int64_t> labels = MakeLabels(30, 12);  // sizes 1..12
  EpisodeOptions options;
  options.n_way = 5;
  options.n_support = 3;
  options.n_query = 4;
  options.seed = 9;
  std::unique_ptr<EpisodeSampler> sampler;
  ASSERT_TRUE(EpisodeSampler::Create(labels, options, &sampler).ok());
  for (int e = 0; e < 50; ++e) {
    const Episode episode = sampler->Next();
    ASSERT_EQ(episode.classes.size(), 5u);
    EXPECT_EQ(std::set<int64_t>(episode.classes.begin(), episode.classes.end()).size(), 5u);
    ASSERT_EQ(episode.support.size(), 15u);
    ASSERT_EQ(episode.query.size(), 20u);
    for (size_t i = 0; i < episode.support.size(); ++i) {
      EXPECT_EQ(episode.support_slot[i], static_cast<int32_t>(i / 3));
      EXPECT_EQ(labels[episode.support[i]], episode.classes[episode.support_slot[i]]);
    }
    for (size_t i = 0; i < episode.query.size(); ++i) {
      EXPECT_EQ(episode.query_slot[i], static_cast<int32_t>(i / 4));
      EXPECT_EQ(labels[episode.query[i]], episode.classes[episode.query_slot[i]]);
    }
    std::set<int64_t> all(episode.support.begin(), episode.support.end());
    all.insert(episode.query.begin(), episode.query.end());
    EXPECT_EQ(all.size(), 35u) << "support and query items must be distinct";
  }
}

TEST(EpisodeSamplerTest, ZeroWayMeansAllEligibleClasses) {
  const std::vector<int64_t> labels = MakeLabels(30, 12);
  EpisodeOptions options;
  options.n_way = 0;
  options.n_support = 5;
  options.n_query = 5;
  std::unique_ptr<EpisodeSampler> sampler;
  ASSERT_TRUE(EpisodeSampler::Create(labels, options, &sampler).ok());
  // Class c has 1 + c % 12 items: sizes >= 10 are 10, 11, 12 -> 3 of every
  // 12 classes; 30 classes -> c % 12 in {9, 10, 11}: c = 9, 10, 11, 21, 22, 23.
  EXPECT_EQ(sampler->n_way(), 6);
  EXPECT_EQ(sampler->Next().classes.size(), 6u);

  options.n_way = 7;
  const Status s = EpisodeSampler::Create(labels, options, &sampler);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("6 of 30 classes"), std::string::npos) << s.message();
}

TEST(ClassBalancedSamplerTest, DimcoBatchesAreTenByTen) {
  std::vector<int64_t> labels;
  for (int c = 0; c < 15; ++c) labels.insert(labels.end(), 10 + c, c);
  labels.insert(labels.end(), 9, 99);  // one item short of eligible
  std::unique_ptr<ClassBalancedSampler> sampler;
  ASSERT_TRUE(ClassBalancedSampler::Create(labels, DimcoBatchOptions(5), &sampler).ok());
  for (int b = 0; b < 30; ++b) {
    const ClassBatch batch = sampler->Next();
    ASSERT_EQ(batch.classes.size(), 10u);
    ASSERT_EQ(batch.indices.size(), 100u);
    std::map<int64_t, std::set<int64_t>> items;
    for (size_t i = 0; i < batch.indices.size(); ++i) {
      EXPECT_EQ(labels[batch.indices[i]], batch.classes[batch.slot[i]]);
      items[labels[batch.indices[i]]].insert(batch.indices[i]);
    }
    EXPECT_EQ(items.count(99), 0u);
    for (const auto& [label, set] : items) EXPECT_EQ(set.size(), 10u) << label;
  }
}

TEST(ClassBalancedSamplerTest, FStatisticBatchesTakeUpToTenItems) {
  std::vector<int64_t> labels;
  for (int c = 0; c < 14; ++c) labels.insert(labels.end(), 1 + c, c);  // sizes 1..14
  std::unique_ptr<ClassBalancedSampler> sampler;
  ASSERT_TRUE(ClassBalancedSampler::Create(labels, FStatisticBatchOptions(1), &sampler).ok());
  std::set<int64_t> drawn_classes;
  for (int b = 0; b < 30; ++b) {
    const ClassBatch batch = sampler->Next();
    ASSERT_EQ(batch.classes.size(), 12u);
    std::map<int64_t, int> counts;
    for (const int64_t i : batch.indices) ++counts[labels[i]];
    for (const auto& [label, count] : counts) {
      EXPECT_EQ(count, std::min<int>(10, 1 + static_cast<int>(label))) << label;
      drawn_classes.insert(label);
    }
  }
  EXPECT_EQ(drawn_classes.count(0), 0u) << "a single-item class has no within-class variance";
  EXPECT_EQ(drawn_classes.size(), 13u);

  ClassBalancedOptions too_many = FStatisticBatchOptions();
  too_many.classes_per_batch = 14;
  EXPECT_TRUE(ClassBalancedSampler::Create(labels, too_many, &sampler).IsInvalidArgument());
}

TEST(VerificationPairsTest, HalfMatchingAndCorrectFlags) {
  const std::vector<int64_t> labels = MakeLabels(25, 5);
  std::vector<VerificationPair> pairs;
  ASSERT_TRUE(SampleVerificationPairs(labels, 1001, 4, &pairs).ok());
  ASSERT_EQ(pairs.size(), 1001u);
  int matching = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const VerificationPair& p = pairs[i];
    EXPECT_NE(p.first, p.second);
    EXPECT_EQ(p.match, labels[p.first] == labels[p.second]);
    EXPECT_EQ(p.match, i < 501);
    matching += p.match ? 1 : 0;
  }
  EXPECT_EQ(matching, 501);
  std::vector<VerificationPair> again;
  ASSERT_TRUE(SampleVerificationPairs(labels, 1001, 4, &again).ok());
  for (size_t i = 0; i < pairs.size(); ++i) EXPECT_EQ(pairs[i].first, again[i].first);

  EXPECT_TRUE(SampleVerificationPairs({1, 1, 1}, 10, 0, &pairs).IsInvalidArgument());
  EXPECT_TRUE(SampleVerificationPairs({1, 2, 3}, 10, 0, &pairs).IsInvalidArgument());
  EXPECT_TRUE(SampleVerificationPairs(labels, 0, 0, &pairs).IsInvalidArgument());
}

}  // namespace
}  // namespace encoders
}  // namespace hedgedb
