// The DB facade end to end: catalog, ingest/get/remove, validation that writes
// nothing, two-stage vs exhaustive, persistence across close/reopen.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::Batch;
using testing::MakeSpec;
using testing::QueryBatch;
using testing::RandomBatch;
using testing::TempDir;

using testing::OpenDb;
using testing::StatsOf;

TEST(DBTest, CatalogCreateListDescribeDrop) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("faces", Kind::kMog, 8);
  spec.match_a = 2.5f;
  spec.match_b = -1.0f;
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  EXPECT_TRUE(db->CreateCollection(spec).IsAlreadyExists());
  ASSERT_TRUE(db->CreateCollection(MakeSpec("codes", Kind::kCodes, 4)).ok());
  std::vector<std::string> names;
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"codes", "faces"}));
  db.reset();
  db = OpenDb(dir.path());
  CollectionSpec got;
  ASSERT_TRUE(db->DescribeCollection("faces", &got).ok());
  EXPECT_EQ(got.kind, Kind::kMog);
  EXPECT_EQ(got.dim, 8);
  EXPECT_EQ(got.components, 2);
  EXPECT_FLOAT_EQ(got.match_a, 2.5f);
  EXPECT_FLOAT_EQ(got.match_b, -1.0f);
  ASSERT_TRUE(db->DropCollection("faces").ok());
  EXPECT_TRUE(db->DescribeCollection("faces", &got).IsNotFound());
  EXPECT_TRUE(db->DropCollection("faces").IsNotFound());
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"codes"}));
}

TEST(DBTest, CreateRejectsBadSpecs) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  auto expect_invalid = [&](CollectionSpec s, const std::string& needle) {
    Status st = db->CreateCollection(s);
    EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
  };
  expect_invalid(MakeSpec("bad name!", Kind::kGaussian, 4), "name");
  // Names that read as paths or as flags.
  for (const char* name : {".", "..", ".hidden", "-x", "--db", ""}) {
    expect_invalid(MakeSpec(name, Kind::kGaussian, 4), "name");
  }
  EXPECT_TRUE(db->CreateCollection(MakeSpec("_a.b-c9", Kind::kGaussian, 4, "Flat")).ok());
  ASSERT_TRUE(db->DropCollection("_a.b-c9").ok());
  expect_invalid(MakeSpec("x", Kind::kGaussian, 0), "dim");
  CollectionSpec s = MakeSpec("x", Kind::kCodes, 4);
  s.code_k = 300;
  expect_invalid(s, "code-k");
  s = MakeSpec("x", Kind::kGaussian, 4);
  s.match_a = -1;
  expect_invalid(s, "match-a");
  s = MakeSpec("x", Kind::kMog, 4);
  s.samples = 7;
  expect_invalid(s, "multiple");
  expect_invalid(MakeSpec("x", Kind::kGaussian, 4, "NoSuchIndex"), "factory");
  std::vector<std::string> names;
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_TRUE(names.empty());
}

// Metadata is kept with the collection across a reopen, and bounded.
TEST(DBTest, MetadataIsKeptAndBounded) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4);
  spec.metadata = "{\"images\": {\"fit\": \"resize\", \"bbox\": true}}";
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  CollectionSpec big = MakeSpec("big", Kind::kGaussian, 4);
  big.metadata.assign(kMaxCollectionMetadata + 1, 'x');
  const Status s = db->CreateCollection(big);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("metadata"), std::string::npos) << s.ToString();
  CollectionSpec latin1 = MakeSpec("latin1", Kind::kGaussian, 4);
  latin1.metadata = "caf\xe9";  // not UTF-8: the JSON descriptor cannot hold it
  const Status l = db->CreateCollection(latin1);
  EXPECT_TRUE(l.IsInvalidArgument()) << l.ToString();
  EXPECT_NE(l.message().find("UTF-8"), std::string::npos) << l.ToString();
  db.reset();
  db = OpenDb(dir.path());
  CollectionSpec got;
  ASSERT_TRUE(db->DescribeCollection("c", &got).ok());
  EXPECT_EQ(got.metadata, spec.metadata);
  EXPECT_TRUE(db->DescribeCollection("latin1", &got).IsNotFound());
  EXPECT_TRUE(db->DescribeCollection("big", &got).IsNotFound());
}

// ListIds: the live ids, ascending, before and after a remove and a reopen.
TEST(DBTest, ListIdsGivesTheLiveIds) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 3, "Flat");
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  std::vector<int64_t> ids;
  ASSERT_TRUE(db->ListIds("c", &ids).ok());
  EXPECT_TRUE(ids.empty());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 5, 10, 1).ingest(), nullptr).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 3, 2, 2).ingest(), nullptr).ok());
  ASSERT_TRUE(db->ListIds("c", &ids).ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 3, 4, 10, 11, 12, 13, 14}));
  const int64_t gone[] = {3, 12};
  ASSERT_TRUE(db->Remove("c", gone, 2, nullptr).ok());
  db.reset();
  db = OpenDb(dir.path());
  ASSERT_TRUE(db->ListIds("c", &ids).ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 4, 10, 11, 13, 14}));
  EXPECT_TRUE(db->ListIds("nope", &ids).IsNotFound());
}

// A float match probability rounds close distances to one value (here all to
// 1.0f: b = 40); the order must still be the distance's, not the ids'.
TEST(DBTest, MatchTiesAreBrokenByTheExactDistance) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("p", Kind::kPoint, 2, "Flat");
  spec.match_b = 40.0f;
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  // Item i at distance (10 - i) / 100 from the origin: the largest id is the
  // closest, so id order is the reverse of the true order.
  std::vector<float> vec;
  std::vector<int64_t> ids;
  for (int i = 0; i < 10; ++i) {
    vec.insert(vec.end(), {0.01f * float(10 - i), 0.0f});
    ids.push_back(i);
  }
  IngestBatch batch;
  batch.data.n = 10;
  batch.data.vec = vec.data();
  batch.ids = ids.data();
  ASSERT_TRUE(db->Ingest("p", batch, nullptr).ok());
  const float origin[2] = {0.0f, 0.0f};
  EmbeddingView query;
  query.n = 1;
  query.vec = origin;
  for (bool exhaustive : {false, true}) {
    SearchOptions options;
    options.k = 4;
    options.exhaustive = exhaustive;
    std::vector<SearchResult> results;
    ASSERT_TRUE(db->Search("p", query, options, &results).ok());
    ASSERT_EQ(results[0].hits.size(), 4u);
    for (size_t r = 0; r < 4; ++r) {
      EXPECT_EQ(results[0].hits[r].id, 9 - int64_t(r)) << "rank " << r;
      EXPECT_EQ(results[0].hits[r].score, 1.0f);  // the tie
    }
    // l2 orders alike.
    options.score = ScoreType::kL2;
    ASSERT_TRUE(db->Search("p", query, options, &results).ok());
    for (size_t r = 0; r < 4; ++r) EXPECT_EQ(results[0].hits[r].id, 9 - int64_t(r));
  }
}

// mls and csd through a real collection (IVF index, exhaustive and
// two-stage with every list probed and every item a candidate) rank as a
// brute-force double computation of the formulas does, except near-ties:
// where the ids at a rank differ, their exact scores are within twice the
// float32 kernel's bound (tests/query/kernels_test.cc: (ceil(D/8) + 11)
// 2^-24 times the sum of the terms' magnitudes). Odd D, variances over nine
// orders of magnitude.
TEST(DBTest, ClosedFormSearchRanksAsBruteForce) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const int D = 65, n = 600, k = 20;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, D, "IVF8,Flat");
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  std::mt19937_64 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> log_var(std::log(1e-4), std::log(1e5));
  auto draw = [&](int count) {
    Batch b;
    b.n = count;
    for (int i = 0; i < count; ++i) {
      b.ids.push_back(i);
      const double scale = std::exp(log_var(rng));
      for (int d = 0; d < D; ++d) {
        b.mean.push_back(normal(rng));
        b.var.push_back(float(scale * std::exp(0.5 * normal(rng))));
      }
    }
    return b;
  };
  const Batch items = draw(n), queries = draw(4);
  ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
  ASSERT_TRUE(db->Flush().ok());
  ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);
  const double bound = 2 * (std::ceil(D / 8.0) + 11) * std::ldexp(1.0, -24);
  for (ScoreType score : {ScoreType::kMls, ScoreType::kCsd}) {
    for (bool exhaustive : {true, false}) {
      SearchOptions options;
      options.k = k;
      options.score = score;
      options.exhaustive = exhaustive;
      options.candidates = n;
      options.nprobe = 8;
      std::vector<SearchResult> results;
      ASSERT_TRUE(db->Search("c", queries.view(), options, &results).ok());
      for (int q = 0; q < queries.n; ++q) {
        std::vector<double> exact(n), magnitude(n);
        for (int i = 0; i < n; ++i) {
          double sum = 0, abs_sum = 0;
          for (int d = 0; d < D; ++d) {
            const double qm = queries.mean[q * D + d], m = items.mean[i * D + d];
            const double qv = queries.var[q * D + d], v = items.var[i * D + d];
            const double delta = qm - m, s = qv + v;
            if (score == ScoreType::kMls) {
              sum += delta * delta / s + std::log(s);
              abs_sum += std::pow(std::fabs(qm) + std::fabs(m), 2) / s + std::fabs(std::log(s)) + 1;
            } else {
              sum += delta * delta + s;
              abs_sum += std::pow(std::fabs(qm) + std::fabs(m), 2) + s;
            }
          }
          exact[i] = score == ScoreType::kMls ? -0.5 * sum - 0.5 * D * std::log(2 * M_PI) : -sum;
          magnitude[i] = bound * abs_sum + 4 * std::ldexp(std::fabs(exact[i]), -24);
        }
        std::vector<int> order(n);
        for (int i = 0; i < n; ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](int a, int b) { return exact[a] > exact[b]; });
        const std::vector<SearchHit>& hits = results[q].hits;
        ASSERT_EQ(hits.size(), size_t(k));
        int swapped = 0;
        for (int j = 0; j < k; ++j) {
          const int got = int(hits[j].id), want = order[j];
          EXPECT_NEAR(hits[j].score, exact[got], magnitude[got]);
          if (got != want) {
            ++swapped;
            EXPECT_LE(std::fabs(exact[got] - exact[want]), magnitude[got] + magnitude[want])
                << ScoreName(score) << (exhaustive ? " exhaustive" : " two-stage") << " query " << q
                << " rank " << j << ": id " << got << " instead of " << want;
          }
        }
        EXPECT_LE(swapped, 2) << ScoreName(score) << " query " << q;
      }
    }
  }
}

class DBKindTest : public ::testing::TestWithParam<Kind> {};

// Stage 1 must really run in these tests: the default IVF index would still be
// untrained (and searches exhaustive) at this size.
std::string FactoryFor(Kind kind) { return kind == Kind::kCodes ? "" : "Flat"; }

TEST(DBTest, TwoStageWithIvfEqualsExhaustiveWhenAllListsAreProbed) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF8,Flat");
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 200, 0, 1).ingest(), nullptr).ok());
  EXPECT_FALSE(StatsOf(db.get(), "c").index_trained);  // 200 < 39 * 8 rows
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 200, 200, 2).ingest(), nullptr).ok());
  // Ingest never waits for training; the next search or flush trains.
  EXPECT_FALSE(StatsOf(db.get(), "c").index_trained);
  ASSERT_TRUE(db->Flush().ok());
  EXPECT_TRUE(StatsOf(db.get(), "c").index_trained);
  EXPECT_EQ(StatsOf(db.get(), "c").index_vectors, 400);
  Batch q = testing::QueryBatch(spec, 4, 3);
  SearchOptions two;
  two.k = 10;
  two.candidates = 400;
  two.nprobe = 8;
  SearchOptions exh = two;
  exh.exhaustive = true;
  std::vector<SearchResult> a, e;
  ASSERT_TRUE(db->Search("c", q.view(), two, &a).ok());
  ASSERT_TRUE(db->Search("c", q.view(), exh, &e).ok());
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < 10; ++j) EXPECT_EQ(a[i].hits[j].id, e[i].hits[j].id);
  }
  // With one probed list and few candidates, stage 1 restricts the candidates.
  SearchOptions narrow = two;
  narrow.nprobe = 1;
  narrow.candidates = 10;
  ASSERT_TRUE(db->Search("c", q.view(), narrow, &a).ok());
  EXPECT_LE(a[0].hits.size(), 10u);
}

TEST_P(DBKindTest, IngestGetRemoveAndAutoIds) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", GetParam(), 6, FactoryFor(GetParam()));
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 50, 100, 1);
  std::vector<std::string> payloads;
  for (int i = 0; i < 50; ++i) payloads.push_back("img/" + std::to_string(i) + ".png");
  IngestBatch ib = b.ingest();
  ib.payloads = payloads.data();
  std::vector<int64_t> ids;
  ASSERT_TRUE(db->Ingest("c", ib, &ids).ok());
  EXPECT_EQ(ids.front(), 100);
  // Without ids, ids continue after the largest one.
  Batch more = RandomBatch(spec, 3, 0, 2);
  IngestBatch mb = more.ingest();
  mb.ids = nullptr;
  ASSERT_TRUE(db->Ingest("c", mb, &ids).ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{150, 151, 152}));

  std::vector<int64_t> want = {100, 149, 999};
  std::vector<Record> recs;
  ASSERT_TRUE(db->Get("c", want.data(), want.size(), &recs).ok());
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_TRUE(recs[0].found);
  EXPECT_FALSE(recs[2].found);
  EXPECT_EQ(recs[1].payload, "img/49.png");
  EXPECT_TRUE(recs[1].has_label);
  EXPECT_EQ(recs[1].label, 149 % 10);
  const int D = spec.dim, C = spec.components;
  switch (spec.kind) {
    case Kind::kPoint:
      EXPECT_EQ(recs[1].vec, std::vector<float>(b.vec.begin() + 49 * D, b.vec.begin() + 50 * D));
      break;
    case Kind::kGaussian:
      EXPECT_EQ(recs[1].var, std::vector<float>(b.var.begin() + 49 * D, b.var.begin() + 50 * D));
      break;
    case Kind::kMog:
      EXPECT_EQ(recs[1].mean,
                std::vector<float>(b.mean.begin() + 49 * C * D, b.mean.begin() + 50 * C * D));
      EXPECT_NEAR(recs[1].weights[0], b.weights[49 * C], 1e-6);
      break;
    case Kind::kCodes:
      EXPECT_EQ(recs[1].codes,
                std::vector<int32_t>(b.codes.begin() + 49 * D, b.codes.begin() + 50 * D));
      break;
  }

  std::vector<int64_t> gone = {100, 101};
  int64_t removed = 0;
  ASSERT_TRUE(db->Remove("c", gone.data(), gone.size(), &removed).ok());
  EXPECT_EQ(removed, 2);
  std::vector<int64_t> unknown = {102, 5000};
  Status s = db->Remove("c", unknown.data(), unknown.size(), &removed);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("5000"), std::string::npos);
  EXPECT_EQ(StatsOf(db.get(), "c").items, 51);  // 102 was not removed either

  // Removed items never come back from search, and survive a reopen removed.
  Batch q = testing::QueryBatch(spec, 4, 3);
  SearchOptions opt;
  opt.k = 60;
  std::vector<SearchResult> res;
  ASSERT_TRUE(db->Search("c", q.view(), opt, &res).ok());
  for (const auto& r : res) {
    EXPECT_EQ(r.hits.size(), 51u);
    for (const auto& h : r.hits) EXPECT_TRUE(h.id != 100 && h.id != 101);
  }
  db.reset();
  db = OpenDb(dir.path());
  ASSERT_TRUE(db->Get("c", gone.data(), gone.size(), &recs).ok());
  EXPECT_FALSE(recs[0].found);
  EXPECT_FALSE(recs[1].found);
  EXPECT_EQ(StatsOf(db.get(), "c").items, 51);
  EXPECT_EQ(StatsOf(db.get(), "c").max_id, 152);
}

TEST_P(DBKindTest, TwoStageEqualsExhaustiveWhenCandidatesCoverAll) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", GetParam(), 8, FactoryFor(GetParam()));
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 300, 0, 11);
  ASSERT_TRUE(db->Ingest("c", b.ingest(), nullptr).ok());
  Batch q = testing::QueryBatch(spec, 5, 12);
  SearchOptions two;
  two.k = 10;
  two.candidates = 300;
  SearchOptions exh = two;
  exh.exhaustive = true;
  std::vector<SearchResult> a, e;
  ASSERT_TRUE(db->Search("c", q.view(), two, &a).ok());
  ASSERT_TRUE(db->Search("c", q.view(), exh, &e).ok());
  ASSERT_EQ(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].hits.size(), 10u);
    for (size_t j = 0; j < 10; ++j) {
      EXPECT_EQ(a[i].hits[j].id, e[i].hits[j].id);
      EXPECT_EQ(a[i].hits[j].score, e[i].hits[j].score);
      if (j > 0) {
        EXPECT_GE(a[i].hits[j - 1].score, a[i].hits[j].score);
      }
    }
    // Codes queries have an eta (their table's entropy), stored codes none.
    const bool has_eta = spec.kind == Kind::kGaussian || spec.kind == Kind::kMog;
    EXPECT_EQ(std::isnan(a[i].query_uncertainty), !has_eta && spec.kind != Kind::kCodes);
    EXPECT_EQ(std::isnan(a[i].hits[0].uncertainty), !has_eta);
  }
}

TEST_P(DBKindTest, IdenticalResultsAfterReopen) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", GetParam(), 8, FactoryFor(GetParam()));
  Batch q = testing::QueryBatch(spec, 3, 5);
  SearchOptions opt;
  opt.k = 5;
  std::vector<SearchResult> before, after;
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 200, 0, 4).ingest(), nullptr).ok());
    ASSERT_TRUE(db->Search("c", q.view(), opt, &before).ok());
  }
  auto db = OpenDb(dir.path());
  ASSERT_TRUE(db->Search("c", q.view(), opt, &after).ok());
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_EQ(before[i].hits.size(), after[i].hits.size());
    for (size_t j = 0; j < before[i].hits.size(); ++j) {
      EXPECT_EQ(before[i].hits[j].id, after[i].hits[j].id);
      EXPECT_EQ(before[i].hits[j].score, after[i].hits[j].score);
    }
  }
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.index_sequence, st.sequence);  // the saved index was loaded, not behind
  EXPECT_EQ(st.index_vectors, 200);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, DBKindTest,
                         ::testing::Values(Kind::kPoint, Kind::kGaussian, Kind::kMog, Kind::kCodes),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(KindName(info.param));
                         });

// Every rejected batch leaves the collection exactly as it was.
TEST(DBTest, BadInputIsRejectedAndWritesNothing) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec g = MakeSpec("g", Kind::kGaussian, 4);
  CollectionSpec c = MakeSpec("codes", Kind::kCodes, 4);
  ASSERT_TRUE(db->CreateCollection(g).ok());
  ASSERT_TRUE(db->CreateCollection(c).ok());
  ASSERT_TRUE(db->Ingest("g", RandomBatch(g, 10, 0, 1).ingest(), nullptr).ok());
  const CollectionStats before = StatsOf(db.get(), "g");

  auto expect_rejected = [&](const std::string& coll, const Batch& b, const std::string& needle) {
    Status s = db->Ingest(coll, b.ingest(), nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find(needle), std::string::npos) << s.ToString();
  };
  Batch nan = RandomBatch(g, 5, 100, 2);
  nan.mean[7] = std::nanf("");
  expect_rejected("g", nan, "not finite");
  Batch inf = RandomBatch(g, 5, 100, 2);
  inf.mean[3] = INFINITY;
  expect_rejected("g", inf, "not finite");
  Batch zero_var = RandomBatch(g, 5, 100, 2);
  zero_var.var[9] = 0.0f;
  expect_rejected("g", zero_var, "must be > 0");
  Batch neg_var = RandomBatch(g, 5, 100, 2);
  neg_var.var[0] = -0.5f;
  expect_rejected("g", neg_var, "variance of item 0");
  Batch dup = RandomBatch(g, 5, 100, 2);
  dup.ids[3] = dup.ids[1];
  expect_rejected("g", dup, "more than once");
  Batch existing = RandomBatch(g, 5, 8, 2);  // ids 8, 9 exist
  expect_rejected("g", existing, "already exists");
  Batch wrong_kind = RandomBatch(MakeSpec("p", Kind::kPoint, 4), 5, 100, 2);
  expect_rejected("g", wrong_kind, "means and variances");
  // A 0-item batch is not refused but writes nothing (checked below too).
  EXPECT_TRUE(db->Ingest("g", Batch().ingest(), nullptr).ok());
  expect_rejected("nope", RandomBatch(g, 5, 100, 2), "no collection named 'nope'");

  Batch bad_code = RandomBatch(c, 5, 0, 2);
  bad_code.codes[6] = 16;
  expect_rejected("codes", bad_code, "outside [0, 16)");
  bad_code.codes[6] = -1;
  expect_rejected("codes", bad_code, "outside");

  const CollectionStats after = StatsOf(db.get(), "g");
  EXPECT_EQ(after.items, before.items);
  EXPECT_EQ(after.sequence, before.sequence);
  EXPECT_EQ(after.max_id, before.max_id);
  EXPECT_EQ(StatsOf(db.get(), "codes").items, 0);

  // Bad queries.
  Batch q = testing::QueryBatch(g, 2, 3);
  q.var[1] = -1.0f;
  std::vector<SearchResult> res;
  Status s = db->Search("g", q.view(), SearchOptions(), &res);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  SearchOptions bad_score;
  bad_score.score = ScoreType::kLogprob;
  s = db->Search("g", testing::QueryBatch(g, 2, 3).view(), bad_score, &res);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  Batch cq = testing::QueryBatch(c, 1, 3);
  cq.logp[0] = std::nanf("");
  s = db->Search("codes", cq.view(), SearchOptions(), &res);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

// The collection is the one place that checks query values (the scorers
// trust their rows): each bad row fails the search, naming the problem.
TEST(DBTest, BadQueryRowsAreRejectedWhereverTheyCome) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec g = MakeSpec("g", Kind::kGaussian, 2, "Flat");
  CollectionSpec m = MakeSpec("m", Kind::kMog, 1, "Flat");
  CollectionSpec c = MakeSpec("c", Kind::kCodes, 2, "PQ");
  c.code_k = 2;
  for (const CollectionSpec& spec : {g, m, c}) {
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest(spec.name, RandomBatch(spec, 5, 0, 1).ingest(), nullptr).ok());
  }
  std::vector<SearchResult> res;
  auto search = [&](const std::string& name, EmbeddingView v) {
    v.n = 1;
    return db->Search(name, v, SearchOptions(), &res);
  };
  const float mean[2] = {0, 0}, zero_var[2] = {0, 1}, nan_mean[2] = {NAN, 0}, var[2] = {1, 1};
  EmbeddingView v;
  v.mean = mean;
  v.var = zero_var;
  EXPECT_NE(search("g", v).message().find("variance"), std::string::npos);
  v.mean = nan_mean;
  v.var = var;
  EXPECT_NE(search("g", v).message().find("not finite"), std::string::npos);
  // Mixtures (C = 2, D = 1): weights must be >= 0 and sum to 1.
  const float mog_mean[2] = {0, 1}, mog_var[2] = {1, 1};
  const float bad_sum[2] = {0.7f, 0.7f}, negative[2] = {1.5f, -0.5f}, good[2] = {0.25f, 0.75f};
  v.mean = mog_mean;
  v.var = mog_var;
  v.weights = bad_sum;
  EXPECT_NE(search("m", v).message().find("sum to"), std::string::npos);
  v.weights = negative;
  EXPECT_NE(search("m", v).message().find(">= 0"), std::string::npos);
  v.weights = good;
  EXPECT_TRUE(search("m", v).ok());
  // Codes tables: log-probabilities, so NaN, +inf and positive entries are
  // refused and -inf (log 0) is fine.
  EmbeddingView t;
  const float nan_table[4] = {NAN, 0, -1, -1}, inf_table[4] = {INFINITY, 0, -1, -1};
  const float positive[4] = {0.5f, -1, -1, -1}, log_zero[4] = {-INFINITY, 0, -1, -1};
  for (const float* table : {nan_table, inf_table, positive}) {
    t.logp = table;
    EXPECT_TRUE(search("c", t).IsInvalidArgument());
  }
  t.logp = log_zero;
  EXPECT_TRUE(search("c", t).ok());
}

TEST(DBTest, DeletedOrCorruptIndexFileIsRebuilt) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF4,Flat");
  Batch q = testing::QueryBatch(spec, 3, 5);
  SearchOptions opt;
  opt.k = 5;
  opt.candidates = 400;
  std::vector<SearchResult> before;
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 400, 0, 4).ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);
    ASSERT_TRUE(db->Search("c", q.view(), opt, &before).ok());
  }
  std::string index_file;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/index")) {
    index_file = e.path().string();
  }
  ASSERT_FALSE(index_file.empty());
  auto check_same = [&]() {
    auto db = OpenDb(dir.path());
    CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_TRUE(st.index_trained);
    EXPECT_EQ(st.index_vectors, 400);
    EXPECT_EQ(st.index_sequence, st.sequence);  // rebuilt and saved
    std::vector<SearchResult> after;
    ASSERT_TRUE(db->Search("c", q.view(), opt, &after).ok());
    for (size_t i = 0; i < before.size(); ++i) {
      for (size_t j = 0; j < before[i].hits.size(); ++j) {
        EXPECT_EQ(before[i].hits[j].id, after[i].hits[j].id);
      }
    }
  };
  std::filesystem::remove(index_file);
  check_same();
  ASSERT_TRUE(std::filesystem::exists(index_file));
  {  // flip a byte in the middle
    std::fstream f(index_file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::filesystem::file_size(index_file) / 2);
    char ch;
    f.read(&ch, 1);
    f.seekp(std::filesystem::file_size(index_file) / 2);
    ch = char(ch ^ 0x5A);
    f.write(&ch, 1);
  }
  check_same();
  std::filesystem::resize_file(index_file, 20);  // truncated
  check_same();
}

TEST(DBTest, StaleIndexFileIsCaughtUp) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8);
  std::string saved_copy = dir.path() + "/old.hidx", index_file;
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 100, 0, 4).ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/index")) {
      index_file = e.path().string();
    }
    std::filesystem::copy_file(index_file, saved_copy);
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 50, 100, 5).ingest(), nullptr).ok());
    std::vector<int64_t> gone = {3};
    ASSERT_TRUE(db->Remove("c", gone.data(), 1, nullptr).ok());
  }
  // Simulate a crash after the first save: the index file is behind.
  std::filesystem::copy_file(saved_copy, index_file,
                             std::filesystem::copy_options::overwrite_existing);
  auto db = OpenDb(dir.path());
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.items, 149);
  EXPECT_EQ(st.index_sequence, st.sequence);
  // Item 120 (written after the old save) is found by two-stage search with
  // itself as the query; item 3 (removed after) is never returned.
  std::vector<int64_t> want = {120};
  std::vector<Record> recs;
  ASSERT_TRUE(db->Get("c", want.data(), 1, &recs).ok());
  Batch q;
  q.n = 1;
  q.mean = recs[0].mean;
  q.var = recs[0].var;
  SearchOptions opt;
  opt.k = 149;
  opt.candidates = 200;
  opt.score = ScoreType::kCsd;
  std::vector<SearchResult> res;
  ASSERT_TRUE(db->Search("c", q.view(), opt, &res).ok());
  ASSERT_EQ(res[0].hits.size(), 149u);
  bool found_120 = false;
  for (const auto& h : res[0].hits) {
    EXPECT_NE(h.id, 3);
    found_120 |= h.id == 120;
  }
  EXPECT_TRUE(found_120);
}

}  // namespace
}  // namespace hedgedb

namespace hedgedb {
namespace {

// Codes over the default flat code index: stage 1 is an exact scan of the
// arena (a quantized pre-scan where the CPU has one), so the two-stage top k
// equals the exhaustive one, scores included, unfiltered and filtered.
TEST(DBTest, CodesTwoStageOverFlatIndexEqualsExhaustive) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", Kind::kCodes, 32);  // k = 16: the pre-scan's shape
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  for (int64_t first = 0; first < 30000; first += 10000) {
    ASSERT_TRUE(
        db->Ingest("c", RandomBatch(spec, 10000, first, uint64_t(first) + 3).ingest(), nullptr)
            .ok());
  }
  const Batch queries = testing::QueryBatch(spec, 20, 11);
  for (bool filtered : {false, true}) {
    SearchOptions o;
    o.k = 10;
    if (filtered) {
      o.filter.label_rule = SearchFilter::LabelRule::kNotIn;
      o.filter.labels = {0, 1, 2};
    }
    std::vector<SearchResult> fast, exact;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &fast).ok());
    o.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries.view(), o, &exact).ok());
    for (size_t q = 0; q < fast.size(); ++q) {
      EXPECT_EQ(fast[q].scored, 100);  // k' candidates, not every item
      ASSERT_EQ(fast[q].hits.size(), 10u);
      for (size_t j = 0; j < 10; ++j) {
        EXPECT_EQ(fast[q].hits[j].id, exact[q].hits[j].id) << "query " << q << " rank " << j;
        EXPECT_EQ(fast[q].hits[j].score, exact[q].hits[j].score);
        if (filtered) {
          EXPECT_GE(fast[q].hits[j].label, 3);
        }
      }
    }
  }
}

// Codes through IndexIVFPQ with identity codebooks: with every list probed and
// every item a candidate, two-stage equals exhaustive; the index survives a
// reopen; removal is physical.
TEST(DBTest, CodesWithIvfPqMatchExhaustiveAndPersist) {
  testing::TempDir dir;
  CollectionSpec spec = testing::MakeSpec("codes", Kind::kCodes, 16, "IVF4,PQ");
  spec.code_k = 8;
  testing::Batch q = testing::RandomBatch(spec, 3, 0, 9);  // logp peaked at its codes
  q.codes.clear();
  q.ids.clear();
  q.labels.clear();
  SearchOptions two;
  two.k = 10;
  two.candidates = 300;
  two.nprobe = 4;
  SearchOptions exh = two;
  exh.exhaustive = true;
  std::vector<SearchResult> a, e;
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("codes", testing::RandomBatch(spec, 300, 0, 1).ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    CollectionStats st;
    ASSERT_TRUE(db->GetStats("codes", &st).ok());
    EXPECT_TRUE(st.index_trained);
    EXPECT_EQ(st.index_vectors, 300);
    ASSERT_TRUE(db->Search("codes", q.view(), two, &a).ok());
    ASSERT_TRUE(db->Search("codes", q.view(), exh, &e).ok());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].hits.size(), 10u);
      for (size_t j = 0; j < 10; ++j) {
        EXPECT_EQ(a[i].hits[j].id, e[i].hits[j].id);
        EXPECT_EQ(a[i].hits[j].score, e[i].hits[j].score);
      }
    }
    std::vector<int64_t> gone = {a[0].hits[0].id};
    ASSERT_TRUE(db->Remove("codes", gone.data(), 1, nullptr).ok());
    ASSERT_TRUE(db->GetStats("codes", &st).ok());
    EXPECT_EQ(st.index_vectors, 299);  // IVF removes physically
  }
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
  std::vector<SearchResult> after;
  ASSERT_TRUE(db->Search("codes", q.view(), two, &after).ok());
  EXPECT_EQ(after[0].hits[0].id, a[0].hits[1].id);
  EXPECT_EQ(after[1].hits[0].id, a[1].hits[0].id);
}

// The files under <db>/index/: inode, size and modification time (ns) of
// each; a rewrite (a new file renamed into place) changes the inode.
std::map<std::string, std::tuple<uint64_t, int64_t, int64_t>> IndexFiles(const std::string& db) {
  std::map<std::string, std::tuple<uint64_t, int64_t, int64_t>> files;
  for (const auto& e : std::filesystem::directory_iterator(db + "/index")) {
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0) continue;
    files[e.path().filename().string()] = {
        uint64_t(st.st_ino), int64_t(st.st_size),
        int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return files;
}

// A collection whose IVF index is still untrained (too few items) has an
// index file that says so; opening the database again, reading and closing
// must leave that file (and every other under index/) as it is: a read is
// not a write. Once trained, the index is saved as before.
TEST(DBTest, AnUntrainedIndexFileIsNotRewrittenByReads) {
  TempDir dir;
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF16,Flat");
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 20, 0, 1).ingest(), nullptr).ok());
  }
  const auto before = IndexFiles(dir.path());
  ASSERT_FALSE(before.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a rewrite would move the times
  for (int round = 0; round < 2; ++round) {
    auto db = OpenDb(dir.path());
    const CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_FALSE(st.index_trained);
    EXPECT_EQ(st.items, 20);
    EXPECT_EQ(st.index_note, "");
    std::vector<SearchResult> r;
    ASSERT_TRUE(db->Search("c", QueryBatch(spec, 2, 3).view(), SearchOptions(), &r).ok());
    EXPECT_EQ(r[0].hits.size(), 10u);
  }
  EXPECT_EQ(IndexFiles(dir.path()), before);
  // Enough items to train: the next flush trains it and saves the file.
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 2000, 100, 2).ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    EXPECT_TRUE(StatsOf(db.get(), "c").index_trained);
  }
  EXPECT_NE(IndexFiles(dir.path()), before);
  auto db = OpenDb(dir.path());
  EXPECT_TRUE(StatsOf(db.get(), "c").index_trained);
}

// A batch of 0 items writes nothing and succeeds (no sequence number, no
// token recorded); negative Monte Carlo samples and an efSearch past
// kMaxEfSearch are refused.
TEST(DBTest, EmptyBatchesAndKnobBounds) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4, "HNSW16");
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  IngestBatch empty;
  empty.token = "t";
  std::vector<int64_t> ids = {7};
  IngestResult result;
  ASSERT_TRUE(db->Ingest("c", empty, &ids, &result).ok());
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(StatsOf(db.get(), "c").sequence, 0u);
  const Batch b = RandomBatch(spec, 30, 0, 1);
  IngestBatch real = b.ingest();
  real.token = "t";  // not taken by the empty batch
  ASSERT_TRUE(db->Ingest("c", real, &ids, &result).ok());
  EXPECT_FALSE(result.replayed);
  EXPECT_EQ(ids.size(), 30u);
  const Batch q = QueryBatch(spec, 1, 2);
  std::vector<SearchResult> r;
  SearchOptions o;
  o.samples = -1;
  Status s = db->Search("c", q.view(), o, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("samples must be >= 0"), std::string::npos) << s.ToString();
  o = SearchOptions();
  o.ef_search = 2000000000;
  s = db->Search("c", q.view(), o, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("ef-search must be at most 16384"), std::string::npos);
  o.min_prob = 0.5;  // the threshold path too
  EXPECT_TRUE(db->Search("c", q.view(), o, &r).IsInvalidArgument());
  o = SearchOptions();
  o.ef_search = kMaxEfSearch;
  ASSERT_TRUE(db->Search("c", q.view(), o, &r).ok());
  EXPECT_EQ(r[0].hits.size(), 10u);
}

// Ids may be negative. Stage 1 pads its answers with -1, and the searcher
// once skipped every negative candidate (and the threshold search stopped
// counting at the first one), so on a trained index no item with a negative
// id was ever returned. Every index kind, top-k and threshold search.
TEST(DBTest, ItemsWithNegativeIdsAreFoundByTwoStageSearch) {
  for (const std::string factory :
       {"IVF4,Flat", "Flat", "HNSW8", "IVF4,SQ8", "IVF4,SQfp16", "SQfp16"}) {
    SCOPED_TRACE(factory);
    TempDir dir;
    auto db = OpenDb(dir.path());
    CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, factory);
    spec.match_a = 1.0f;
    spec.match_b = 2.0f;
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    const Batch items = RandomBatch(spec, 1000, -500, 7);  // ids -500 .. 499
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    // The threshold search reads probabilities: a calibration (labels id % 10).
    CalibrateOptions fit;
    fit.max_pairs = 20000;  // enough for a map; keeps the test fast under sanitizers
    Status calibrated = db->Calibrate("c", fit, nullptr);
    ASSERT_TRUE(calibrated.ok()) << calibrated.ToString();
    EmbeddingView queries = items.view();
    queries.n = 40;  // the first 40 items (all with negative ids) as queries
    SearchOptions o;
    o.k = 10;
    o.with_uncertainty = false;
    std::vector<SearchResult> exact, two_stage, threshold;
    SearchOptions exhaustive = o;
    exhaustive.exhaustive = true;
    ASSERT_TRUE(db->Search("c", queries, exhaustive, &exact).ok());
    ASSERT_TRUE(db->Search("c", queries, o, &two_stage).ok());
    SearchOptions by_threshold = o;
    by_threshold.min_prob = 1e-6;
    by_threshold.max_results = 10;
    Status s = db->Search("c", queries, by_threshold, &threshold);
    ASSERT_TRUE(s.ok()) << s.ToString();
    int negative_best = 0;
    for (size_t q = 0; q < exact.size(); ++q) {
      ASSERT_FALSE(exact[q].hits.empty());
      const int64_t best = exact[q].hits[0].id;
      negative_best += best < 0;
      auto has = [&](const SearchResult& r) {
        return std::any_of(r.hits.begin(), r.hits.end(),
                           [&](const SearchHit& h) { return h.id == best; });
      };
      EXPECT_TRUE(has(two_stage[q])) << "query " << q << " best " << best;
      EXPECT_TRUE(has(threshold[q])) << "query " << q << " best " << best;
    }
    EXPECT_GT(negative_best, 30);  // the exact best are mostly the (negative) items themselves
  }
}

// Stage 1 pads a short answer (the probed lists hold fewer vectors than the
// candidates asked for) with the id -1. With an item of id -1 every padding
// slot found that item's row: once the duplicate check was skipped for an
// index without tombstones, the item came back many times (k = 50 gave 50
// hits of id -1). It must come back once, and every hit's id once.
TEST(DBTest, AnItemWithIdMinusOneComesBackOnceWhenStageOnePads) {
  for (const std::string factory : {"IVF4,Flat", "IVF4,SQ8", "IVF4,SQfp16"}) {
    SCOPED_TRACE(factory);
    TempDir dir;
    auto db = OpenDb(dir.path());
    CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, factory);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    const Batch items = RandomBatch(spec, 1000, -500, 7);  // ids -500 .. 499
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    EmbeddingView query = items.view();
    const int64_t minus_one = 499;  // the row of id -1
    query.mean += minus_one * spec.dim;
    query.var += minus_one * spec.dim;
    query.n = 1;
    SearchOptions o;
    o.k = 50;
    o.nprobe = 1;         // one list of about 250 vectors...
    o.candidates = 1000;  // ...asked for 1,000: the rest is padding
    o.with_uncertainty = false;
    o.score = ScoreType::kMls;  // a closed form: the item itself ranks first
    std::vector<SearchResult> r;
    ASSERT_TRUE(db->Search("c", query, o, &r).ok());
    ASSERT_EQ(r.size(), 1u);
    std::set<int64_t> ids;
    int minus_ones = 0;
    for (const SearchHit& h : r[0].hits) {
      EXPECT_TRUE(ids.insert(h.id).second) << "id " << h.id << " twice";
      minus_ones += h.id == -1;
    }
    EXPECT_EQ(minus_ones, 1);
    EXPECT_EQ(r[0].hits.size(), 50u);
  }
}

// An exhaustive batch scores the same rows for all its queries together
// (rows split among two threads above 8,192 of them; a label filter that
// passes few enough items takes the same path): every query's hits equal a
// search of that query alone, scores bitwise.
TEST(DBTest, ExhaustiveBatchesEqualOneQueryPerCall) {
  TempDir dir;
  Options options;
  options.threads = 2;
  auto db = OpenDb(dir.path(), options);
  for (const Kind kind : {Kind::kGaussian, Kind::kMog, Kind::kPoint}) {
    const std::string name = KindName(kind);
    CollectionSpec spec = MakeSpec(name, kind, 12, "Flat");
    if (kind == Kind::kMog) spec.components = 2;
    spec.samples = 4;
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    const int64_t n = kind == Kind::kMog ? 3000 : 9000;
    const Batch items = RandomBatch(spec, n, 0, 11);
    ASSERT_TRUE(db->Ingest(name, items.ingest(), nullptr).ok());
    EmbeddingView queries = items.view();
    queries.n = 7;
    for (const ScoreType score : {ScoreType::kDefault, ScoreType::kMls, ScoreType::kCsd}) {
      if (kind == Kind::kPoint && score != ScoreType::kDefault) continue;
      for (const bool filtered : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << name << " " << ScoreName(score) << (filtered ? " filtered" : ""));
        SearchOptions o;
        o.k = 10;
        o.exhaustive = !filtered;
        o.score = score;
        if (filtered) {  // labels id % 10: a tenth of the items, all scored
          o.filter.label_rule = SearchFilter::LabelRule::kIn;
          o.filter.labels = {3};
        }
        std::vector<SearchResult> batch;
        Status s = db->Search(name, queries, o, &batch);
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (int64_t q = 0; q < queries.n; ++q) {
          const int64_t per = int64_t(spec.dim) * spec.components;
          EmbeddingView one = queries;
          one.n = 1;
          if (one.vec) one.vec = queries.vec + q * per;
          if (one.mean) one.mean = queries.mean + q * per;
          if (one.var) one.var = queries.var + q * per;
          if (one.weights) one.weights = queries.weights + q * spec.components;
          std::vector<SearchResult> alone;
          ASSERT_TRUE(db->Search(name, one, o, &alone).ok());
          ASSERT_EQ(alone[0].hits.size(), batch[size_t(q)].hits.size());
          EXPECT_EQ(alone[0].scored, batch[size_t(q)].scored);
          for (size_t j = 0; j < alone[0].hits.size(); ++j) {
            EXPECT_EQ(alone[0].hits[j].id, batch[size_t(q)].hits[j].id) << q << " " << j;
            EXPECT_EQ(alone[0].hits[j].score, batch[size_t(q)].hits[j].score) << q << " " << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hedgedb
