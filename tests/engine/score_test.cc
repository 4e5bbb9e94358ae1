// The public scoring functions (hedgedb/score.h) return the numbers of an
// exhaustive search and check their input as the collection does.
#include "hedgedb/score.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine_test_util.h"

namespace hedgedb {
namespace testing {
namespace {

struct Case {
  Kind kind;
  ScoreType score;
};

class ScoreMatrixTest : public ::testing::TestWithParam<Case> {};

TEST_P(ScoreMatrixTest, EqualsExhaustiveSearch) {
  const Case c = GetParam();
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", c.kind, 6);
  spec.match_a = 1.7f;
  spec.match_b = 0.4f;
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  const Batch items = RandomBatch(spec, 40, 0, 11);
  std::vector<int64_t> ids;
  ASSERT_TRUE(db->Ingest("c", items.ingest(), &ids).ok());
  const Batch queries = QueryBatch(spec, 5, 12);

  SearchOptions search;
  search.k = 40;
  search.score = c.score;
  search.exhaustive = true;
  search.samples = c.kind == Kind::kMog ? 4 : 6;  // not the spec's default
  search.has_seed = true;
  search.seed = 99;
  std::vector<SearchResult> results;
  Status s = db->Search("c", queries.view(), search, &results);
  ASSERT_TRUE(s.ok()) << s.ToString();

  ScoreOptions options;
  options.score = c.score;
  options.samples = search.samples;
  options.has_seed = true;
  options.seed = search.seed;
  std::vector<float> matrix;
  s = ScoreMatrix(spec, queries.view(), items.view(), options, &matrix);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(matrix.size(), size_t(5 * 40));
  std::vector<float> item_eta, query_eta;
  ASSERT_TRUE(ItemUncertainties(spec, items.view(), options, &item_eta).ok());
  ASSERT_EQ(item_eta.size(), size_t(40));
  const bool has_eta = c.kind == Kind::kGaussian || c.kind == Kind::kMog;
  if (has_eta) {
    Batch as_items = queries;
    as_items.logp.clear();
    ASSERT_TRUE(ItemUncertainties(spec, as_items.view(), options, &query_eta).ok());
  }
  for (size_t q = 0; q < results.size(); ++q) {
    ASSERT_EQ(results[q].hits.size(), size_t(40));
    for (const SearchHit& hit : results[q].hits) {
      // Ids are 0..39, the rows' order.
      EXPECT_EQ(hit.score, matrix[q * 40 + size_t(hit.id)]) << "query " << q << " id " << hit.id;
      if (has_eta) {
        EXPECT_EQ(hit.uncertainty, item_eta[size_t(hit.id)]);
      } else {
        EXPECT_TRUE(std::isnan(item_eta[size_t(hit.id)]));
      }
    }
    if (has_eta) {
      EXPECT_EQ(results[q].query_uncertainty, query_eta[q]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ScoreMatrixTest,
    ::testing::Values(Case{Kind::kPoint, ScoreType::kDefault}, Case{Kind::kPoint, ScoreType::kL2},
                      Case{Kind::kGaussian, ScoreType::kMc}, Case{Kind::kGaussian, ScoreType::kMls},
                      Case{Kind::kGaussian, ScoreType::kCsd}, Case{Kind::kMog, ScoreType::kMc},
                      Case{Kind::kMog, ScoreType::kMatch},
                      Case{Kind::kCodes, ScoreType::kLogprob}));

// The same input errors as ingest and search, word for word.
TEST(ScoreMatrixTest, ChecksInputLikeTheCollection) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  const CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4);
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch items = RandomBatch(spec, 3, 0, 1);
  items.var[5] = 0.0f;  // item 1
  const Batch queries = QueryBatch(spec, 2, 2);
  std::vector<int64_t> ids;
  const Status ingest = db->Ingest("c", items.ingest(), &ids);
  ASSERT_FALSE(ingest.ok());
  std::vector<float> matrix;
  const Status scored = ScoreMatrix(spec, queries.view(), items.view(), ScoreOptions(), &matrix);
  EXPECT_EQ(scored.ToString(), ingest.ToString());
  std::vector<float> eta;
  EXPECT_EQ(ItemUncertainties(spec, items.view(), ScoreOptions(), &eta).ToString(),
            ingest.ToString());

  Batch bad_queries = queries;
  bad_queries.mean[0] = std::nanf("");
  const Batch good_items = RandomBatch(spec, 3, 0, 1);
  std::vector<SearchResult> results;
  const Status search = db->Search("c", bad_queries.view(), SearchOptions(), &results);
  ASSERT_FALSE(search.ok());
  EXPECT_EQ(
      ScoreMatrix(spec, bad_queries.view(), good_items.view(), ScoreOptions(), &matrix).ToString(),
      search.ToString());

  ScoreOptions logprob;
  logprob.score = ScoreType::kLogprob;  // codes only
  SearchOptions search_logprob;
  search_logprob.score = ScoreType::kLogprob;
  const Status wrong_score = db->Search("c", queries.view(), search_logprob, &results);
  ASSERT_FALSE(wrong_score.ok());
  EXPECT_EQ(ScoreMatrix(spec, queries.view(), good_items.view(), logprob, &matrix).ToString(),
            wrong_score.ToString());
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
