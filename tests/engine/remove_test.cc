// Removal is correct for every kind of coarse index: after removing items
// (a few, then half), two-stage search still finds what an exhaustive scan
// finds, removed items never come back, and all of it holds after reopen.
#include <gtest/gtest.h>

#include <set>

#include "engine_test_util.h"

namespace hedgedb {
namespace {

using testing::Batch;
using testing::MakeSpec;
using testing::RandomBatch;
using testing::TempDir;

struct RemoveCase {
  const char* name;
  Kind kind;
  const char* factory;
};

void PrintTo(const RemoveCase& c, std::ostream* os) { *os << c.name << " '" << c.factory << "'"; }

class RemoveTest : public ::testing::TestWithParam<RemoveCase> {};

// Mean fraction of the exhaustive top-k that the two-stage search returns.
double RecallAgainstExhaustive(DB* db, const std::string& name, const EmbeddingView& queries,
                               SearchOptions options, const std::set<int64_t>& removed) {
  std::vector<SearchResult> two_stage, exact;
  Status s = db->Search(name, queries, options, &two_stage);
  EXPECT_TRUE(s.ok()) << s.ToString();
  options.exhaustive = true;
  s = db->Search(name, queries, options, &exact);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (two_stage.size() != exact.size()) return 0;
  double hits = 0, total = 0;
  for (size_t q = 0; q < exact.size(); ++q) {
    std::set<int64_t> truth;
    for (const SearchHit& h : exact[q].hits) truth.insert(h.id);
    for (const SearchHit& h : two_stage[q].hits) {
      EXPECT_EQ(removed.count(h.id), 0u) << "removed item " << h.id << " returned";
      hits += truth.count(h.id);
    }
    total += double(truth.size());
  }
  return total > 0 ? hits / total : 0;
}

TEST_P(RemoveTest, SearchMatchesExhaustiveAfterRemoveAndReopen) {
  const RemoveCase& c = GetParam();
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", c.kind, c.kind == Kind::kCodes ? 8 : 16, c.factory);
  // The default IVF1024 trains once it has 39 items per list.
  const int64_t n = std::string(c.factory).empty() ? 40000 : 4000;
  Batch items = RandomBatch(spec, n, 0, 11);
  // Queries are stored items (codes: their peaked tables), so each query's
  // best match is known to be present until it is removed.
  const int64_t nq = 40;
  Batch queries = items;
  queries.n = nq;
  queries.ids.clear();
  queries.labels.clear();
  queries.codes.clear();
  SearchOptions options;
  options.k = 10;
  options.nprobe = 1 << 20;  // every list: isolate removal from IVF recall
  options.ef_search = 512;
  options.with_uncertainty = false;
  if (c.kind == Kind::kGaussian) options.score = ScoreType::kCsd;  // what stage 1 ranks by

  std::set<int64_t> removed;
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());  // trains the index
    CollectionStats st;
    ASSERT_TRUE(db->GetStats("c", &st).ok());
    ASSERT_TRUE(st.index_trained) << c.name;
    EXPECT_GE(RecallAgainstExhaustive(db.get(), "c", queries.view(), options, removed), 0.95);

    // A few items, one of them a query's own item.
    std::vector<int64_t> few = {0, 1234, 3999};
    ASSERT_TRUE(db->Remove("c", few.data(), few.size(), nullptr).ok());
    removed.insert(few.begin(), few.end());
    EXPECT_GE(RecallAgainstExhaustive(db.get(), "c", queries.view(), options, removed), 0.95)
        << c.name << " after removing 3";
    // A second remove must not trip over the first.
    std::vector<int64_t> more = {5, 6, 7};
    ASSERT_TRUE(db->Remove("c", more.data(), more.size(), nullptr).ok());
    removed.insert(more.begin(), more.end());
    // Half of the rest.
    std::vector<int64_t> half;
    for (int64_t id = 100; id < n; id += 2) {
      if (!removed.count(id)) half.push_back(id);
    }
    ASSERT_TRUE(db->Remove("c", half.data(), half.size(), nullptr).ok());
    removed.insert(half.begin(), half.end());
    EXPECT_GE(RecallAgainstExhaustive(db.get(), "c", queries.view(), options, removed), 0.95)
        << c.name << " after removing half";
    // New items after removals are found too.
    Batch extra = RandomBatch(spec, 50, n, 12);
    ASSERT_TRUE(db->Ingest("c", extra.ingest(), nullptr).ok());
    EXPECT_GE(RecallAgainstExhaustive(db.get(), "c", queries.view(), options, removed), 0.95)
        << c.name << " after removing and adding";
  }
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
  EXPECT_GE(RecallAgainstExhaustive(db.get(), "c", queries.view(), options, removed), 0.95)
      << c.name << " after reopen";
  // And once more after a reopen (the saved index must stay consistent).
  std::vector<int64_t> last = {1, 3};
  ASSERT_TRUE(db->Remove("c", last.data(), last.size(), nullptr).ok());
  removed.insert(last.begin(), last.end());
  EXPECT_GE(RecallAgainstExhaustive(db.get(), "c", queries.view(), options, removed), 0.95)
      << c.name << " after reopen and remove";
}

INSTANTIATE_TEST_SUITE_P(IndexTypes, RemoveTest,
                         ::testing::Values(RemoveCase{"Default", Kind::kGaussian, ""},
                                           RemoveCase{"Flat", Kind::kGaussian, "Flat"},
                                           RemoveCase{"IvfFlat", Kind::kGaussian, "IVF32,Flat"},
                                           RemoveCase{"IvfSq8", Kind::kGaussian, "IVF32,SQ8"},
                                           RemoveCase{"Hnsw", Kind::kGaussian, "HNSW16"},
                                           RemoveCase{"Point", Kind::kPoint, "IVF16,Flat"},
                                           RemoveCase{"CodesPq", Kind::kCodes, "PQ"},
                                           RemoveCase{"CodesIvfPq", Kind::kCodes, "IVF8,PQ"}),
                         [](const ::testing::TestParamInfo<RemoveCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace hedgedb
