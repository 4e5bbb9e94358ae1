// Ordinary use must never lose data or answer wrongly: index factory strings
// are checked before FAISS sees them, a damaged collection does not take the
// others down, an index that missed a write is never saved as covering it, a
// damaged store is never overwritten, lengths are checked before allocating,
// and a retried batch is not written twice.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.h"
#include "engine_test_util.h"
#include "index/coarse_index.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace {

using testing::Batch;
using testing::MakeSpec;
using testing::RandomBatch;
using testing::TempDir;

using testing::OpenDb;
using testing::StatsOf;

// The first n items of `items` each find themselves first (by the distance
// between means, where an item is its own best match).
void ExpectItemsFindThemselves(DB* db, const std::string& name, const Batch& items, int64_t n,
                               int64_t first_id = 0) {
  Batch queries = items;
  queries.n = n;
  SearchOptions opt;
  opt.k = 1;
  opt.score = ScoreType::kL2;
  opt.candidates = 50;
  std::vector<SearchResult> res;
  ASSERT_TRUE(db->Search(name, queries.view(), opt, &res).ok());
  for (int64_t q = 0; q < n; ++q) {
    ASSERT_EQ(res[q].hits.size(), 1u);
    EXPECT_EQ(res[q].hits[0].id, first_id + q);
  }
}

std::string OnlyIndexFile(const std::string& db_path) {
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(db_path + "/index")) {
    if (e.path().extension() == ".hidx") file = e.path().string();
  }
  return file;
}

TEST(FactoryStringTest, DangerousStringsAreRefusedAtCreate) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  // Each of these made FAISS abort, crash or allocate gigabytes later on.
  for (const char* factory :
       {"IVF0,Flat", "HNSW0", "HNSW1", "NSG4", "IVF2,PQ0", "IVF100000000,Flat", "PQ0", "IVF4,PQ4x0",
        "IVF4,PQ4x40", "IDMap,Flat", "IVF4,Flat,Refine(Flat)", "LSH", "",
        "IVF99999999999999999999,Flat", "HNSW32,PQ4", "PCA4,Flat", "IVF4,PQ4" /* 9 % 4 */,
        "IVF4,PQ3x4" /* FAISS 1.7.3 */}) {
    if (std::string(factory).empty()) continue;  // the default, valid
    CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, factory);
    Status s = db->CreateCollection(spec);
    EXPECT_TRUE(s.IsInvalidArgument()) << factory << ": " << s.ToString();
    EXPECT_NE(s.message().find(factory), std::string::npos) << s.message();
  }
  std::vector<std::string> names;
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_TRUE(names.empty());
  CollectionSpec codes = MakeSpec("k", Kind::kCodes, 8, "IVF0,PQ");
  EXPECT_TRUE(db->CreateCollection(codes).IsInvalidArgument());
  codes.index_factory = "HNSW32";
  EXPECT_TRUE(db->CreateCollection(codes).IsInvalidArgument());
}

TEST(FactoryStringTest, EveryAcceptedFormIngestsSearchesRemovesAndReopens) {
  TempDir dir;
  const std::vector<std::string> accepted = {
      "Flat",  "HNSW8", "HNSW8,SQ8", "IVF4,Flat", "IVF4,SQ8", "IVF4,SQfp16", "IVF4_HNSW8,Flat",
      "PQ3x4", "SQ8",   "SQ4",       "SQfp16"};
  Batch items;
  {
    auto db = OpenDb(dir.path());
    for (size_t i = 0; i < accepted.size(); ++i) {
      CollectionSpec spec = MakeSpec("c" + std::to_string(i), Kind::kGaussian, 8, accepted[i]);
      Status s = db->CreateCollection(spec);
      ASSERT_TRUE(s.ok()) << accepted[i] << ": " << s.ToString();
      items = RandomBatch(spec, 1200, 0, 3);
      ASSERT_TRUE(db->Ingest(spec.name, items.ingest(), nullptr).ok()) << accepted[i];
      ASSERT_TRUE(db->Flush().ok());
      EXPECT_TRUE(StatsOf(db.get(), spec.name).index_trained) << accepted[i];
      std::vector<int64_t> gone = {0, 1, 2};
      ASSERT_TRUE(db->Remove(spec.name, gone.data(), gone.size(), nullptr).ok());
    }
  }
  auto db = OpenDb(dir.path());
  SearchOptions opt;
  opt.k = 3;
  opt.nprobe = 4;
  // Every form must give the best match of an exhaustive search (every item
  // scored exactly): the kL2 score ignores the variances, so an item is its
  // own best match, but stage 1 ranks candidates by its coarse vectors
  // (which add the variances' trace), so only an index that hands the item
  // to stage 2 finds it. The non-graph forms see enough candidates here
  // (nprobe 4 of 4 lists, 200 of 1,197 candidates, which PQ3x4's
  // 16-centroid codes need) and must agree on all 47 queries. HNSW graphs
  // built by several threads differ from run to run, and a graph may leave
  // a node no search reaches at any ef_search (an 8-link graph over SQ8
  // codes missed one once in 20 runs under ASan, also at ef_search 128), so
  // the graph forms may differ on 2.
  opt.ef_search = 128;
  opt.score = ScoreType::kL2;
  opt.candidates = 200;
  Batch queries = items;
  queries.n = 50;
  SearchOptions all = opt;
  all.exhaustive = true;
  for (size_t i = 0; i < accepted.size(); ++i) {
    const std::string name = "c" + std::to_string(i);
    CollectionStats st = StatsOf(db.get(), name);
    EXPECT_EQ(st.items, 1197) << accepted[i];
    EXPECT_FALSE(st.index_stale) << accepted[i] << ": " << st.index_note;
    std::vector<SearchResult> res, exact;
    ASSERT_TRUE(db->Search(name, queries.view(), opt, &res).ok()) << accepted[i];
    ASSERT_TRUE(db->Search(name, queries.view(), all, &exact).ok()) << accepted[i];
    const bool graph = accepted[i].rfind("HNSW", 0) == 0;
    int differ = 0;
    for (int64_t q = 3; q < queries.n; ++q) {
      ASSERT_FALSE(res[q].hits.empty()) << accepted[i];
      EXPECT_EQ(exact[q].hits[0].id, q) << accepted[i] << ": the exact best match is the item";
      if (res[q].hits[0].id != exact[q].hits[0].id) ++differ;
    }
    EXPECT_LE(differ, graph ? 2 : 0) << accepted[i] << ": best matches unlike the exhaustive's";
    for (int64_t q = 0; q < 3; ++q) {
      for (const SearchHit& h : res[q].hits) EXPECT_GE(h.id, 3) << accepted[i];
    }
  }
}

// Writes, through the record store, collection "good" (20 items) and
// collection "bad", whose descriptor names a factory string this version
// refuses, as an older version may have written it (ids 0..4).
void WriteGoodAndRefusedCollections(const TempDir& dir) {
  CollectionSpec good = MakeSpec("good", Kind::kGaussian, 8, "Flat");
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(good).ok());
    ASSERT_TRUE(db->Ingest("good", RandomBatch(good, 20, 0, 1).ingest(), nullptr).ok());
  }
  std::unique_ptr<storage::RecordStore> store;
  ASSERT_TRUE(
      storage::RecordStore::Open(storage::StoreOptions(), dir.path() + "/store", &store).ok());
  storage::CollectionMeta bad;
  bad.spec = MakeSpec("bad", Kind::kGaussian, 8, "HNSW0");
  ASSERT_TRUE(store->CreateCollection(&bad).ok());
  // Five records (ids 0..4): a gaussian row is the mean and the variances.
  std::vector<float> row(16, 0.5f);
  std::vector<storage::RecordWrite> puts(5);
  for (int64_t i = 0; i < 5; ++i) {
    puts[i].id = i;
    puts[i].row = row.data();
  }
  bad.sequence = 1;
  ASSERT_TRUE(store->Commit(bad, puts, {}).ok());
}

// A collection whose descriptor names a factory string this version refuses
// (written by an older version) fails alone, can be dropped, and its name
// used again: the new collection gets a new id, nothing of the old one shows.
TEST(FactoryStringTest, BadCollectionFromAnOlderVersionDoesNotStopTheOthers) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteGoodAndRefusedCollections(dir));
  auto db = OpenDb(dir.path());
  std::vector<std::string> names;
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"bad", "good"}));
  EXPECT_EQ(StatsOf(db.get(), "good").items, 20);
  CollectionStats st;
  Status s = db->GetStats("bad", &st);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("HNSW0"), std::string::npos) << s.message();
  ASSERT_TRUE(db->DropCollection("bad").ok());
  ASSERT_TRUE(db->ListCollections(&names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"good"}));

  CollectionSpec again = MakeSpec("bad", Kind::kGaussian, 8, "Flat");
  ASSERT_TRUE(db->CreateCollection(again).ok());
  ASSERT_TRUE(db->Ingest("bad", RandomBatch(again, 3, 100, 2).ingest(), nullptr).ok());
  db.reset();
  db = OpenDb(dir.path());
  EXPECT_EQ(StatsOf(db.get(), "bad").items, 3);
  EXPECT_EQ(StatsOf(db.get(), "good").items, 20);
  std::vector<Record> recs;
  const int64_t ids[] = {0, 100};
  ASSERT_TRUE(db->Get("bad", ids, 2, &recs).ok());
  EXPECT_FALSE(recs[0].found);
  EXPECT_TRUE(recs[1].found);
}

// The same from the command line: `stats` of every collection lists the
// damaged one with its error beside the others' statistics and exits 1;
// `drop` removes it, after which `stats` succeeds.
TEST(FactoryStringTest, CliStatsListsTheOthersBesideADamagedCollection) {
  TempDir dir, scratch;
  ASSERT_NO_FATAL_FAILURE(WriteGoodAndRefusedCollections(dir));
  auto run = [&](const std::vector<std::string>& args) {
    return cli_testing::RunHedgedb(scratch.path(), args);
  };
  const std::vector<std::string> stats = {"stats", "--db", dir.path()};
  cli_testing::CliRun r = run(stats);
  EXPECT_EQ(r.exit_code, 1) << cli_testing::DescribeRun(stats, r);
  EXPECT_NE(r.err.find("a collection cannot be opened"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("HNSW0"), std::string::npos) << r.err;
  const std::vector<nlohmann::json> lines = cli_testing::JsonLines(r.out, true);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const nlohmann::json& listed = lines[0]["collections"];
  ASSERT_EQ(listed.size(), 2u) << r.out;
  EXPECT_EQ(listed[0]["name"], "bad");
  EXPECT_NE(listed[0]["error"].get<std::string>().find("HNSW0"), std::string::npos) << r.out;
  EXPECT_EQ(listed[1]["name"], "good");
  EXPECT_EQ(listed[1]["items"], 20);

  const std::vector<std::string> drop = {"drop", "--db", dir.path(), "--collection", "bad"};
  r = run(drop);
  ASSERT_EQ(r.exit_code, 0) << cli_testing::DescribeRun(drop, r);
  r = run(stats);
  ASSERT_EQ(r.exit_code, 0) << cli_testing::DescribeRun(stats, r);
  const nlohmann::json after = cli_testing::JsonLines(r.out, true).at(0)["collections"];
  ASSERT_EQ(after.size(), 1u) << r.out;
  EXPECT_EQ(after[0]["name"], "good");
  EXPECT_EQ(after[0]["items"], 20);
}

// A stored spec out of range (written by another version, or edited) fails
// its collection with the field's rule, before anything is allocated for it.
TEST(FactoryStringTest, StoredSpecOutOfRangeFailsItsCollection) {
  TempDir dir;
  {
    std::unique_ptr<storage::RecordStore> store;
    ASSERT_TRUE(
        storage::RecordStore::Open(storage::StoreOptions(), dir.path() + "/store", &store).ok());
    storage::CollectionMeta huge;
    huge.spec = MakeSpec("huge", Kind::kGaussian, 1 << 30, "Flat");
    ASSERT_TRUE(store->CreateCollection(&huge).ok());
  }
  auto db = OpenDb(dir.path());
  CollectionStats st;
  Status s = db->GetStats("huge", &st);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("dim must be in [1, 65536]"), std::string::npos) << s.message();
  EXPECT_TRUE(db->DropCollection("huge").ok());
}

TEST(StaleIndexTest, IndexThatMissedABatchIsNeverSavedAsCoveringIt) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF8,Flat");
  Batch first = RandomBatch(spec, 400, 0, 1);
  Batch second = RandomBatch(spec, 100, 400, 2);
  // The new items must find themselves, whatever state the index is in.
  auto expect_found = [&](DB* db, const char* when) {
    SCOPED_TRACE(when);
    ExpectItemsFindThemselves(db, "c", second, 20, 400);
  };
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", first.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);
    index::CoarseIndex::FailNextAddsForTest(1);
    IngestResult result;
    std::vector<int64_t> ids;
    // The batch is durable: the call succeeds and says what happened.
    ASSERT_TRUE(db->Ingest("c", second.ingest(), &ids, &result).ok());
    EXPECT_EQ(ids.size(), 100u);
    EXPECT_NE(result.index_warning.find("injected failure"), std::string::npos)
        << result.index_warning;
    CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_TRUE(st.index_stale);
    EXPECT_EQ(st.items, 500);
    expect_found(db.get(), "stale index: exhaustive");
    // Removes and flushes keep working and never stamp the stale index.
    std::vector<int64_t> gone = {0};
    ASSERT_TRUE(db->Remove("c", gone.data(), 1, nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    st = StatsOf(db.get(), "c");
    EXPECT_LT(st.index_sequence, st.sequence);
  }
  auto db = OpenDb(dir.path());
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_FALSE(st.index_stale) << st.index_note;
  EXPECT_EQ(st.index_sequence, st.sequence);
  EXPECT_EQ(st.items, 499);
  expect_found(db.get(), "after reopen");
}

TEST(StaleIndexTest, IndexThatCannotBeRebuiltLeavesTheCollectionSearchable) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF8,Flat");
  Batch items = RandomBatch(spec, 400, 0, 1);
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
  }
  std::filesystem::remove(OnlyIndexFile(dir.path()));
  index::CoarseIndex::FailNextAddsForTest(1);  // the rebuild on open fails
  auto db = OpenDb(dir.path());
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_TRUE(st.index_stale);
  EXPECT_NE(st.index_note.find("cannot be rebuilt"), std::string::npos) << st.index_note;
  ExpectItemsFindThemselves(db.get(), "c", items, 5);
}

TEST(IngestTest, IngestReturnsBeforeTrainingAndTheNextSearchTrains) {
  TempDir dir;
  auto db = OpenDb(dir.path());
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "IVF8,Flat");
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch items = RandomBatch(spec, 400, 0, 1);
  ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
  EXPECT_FALSE(StatsOf(db.get(), "c").index_trained);
  Batch queries = items;
  queries.n = 3;
  SearchOptions opt;
  opt.k = 1;
  std::vector<SearchResult> res;
  ASSERT_TRUE(db->Search("c", queries.view(), opt, &res).ok());
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_TRUE(st.index_trained);
  EXPECT_EQ(st.index_vectors, 400);
}

TEST(IngestTest, BatchTokenMakesARetryIdempotent) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "Flat");
  Batch items = RandomBatch(spec, 50, 0, 1);
  IngestBatch batch = items.ingest();
  batch.ids = nullptr;  // automatic ids: a blind retry would duplicate them
  batch.token = "upload-2026-11-23-0001";
  std::vector<int64_t> first_ids;
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    IngestResult result;
    ASSERT_TRUE(db->Ingest("c", batch, &first_ids, &result).ok());
    EXPECT_FALSE(result.replayed);
    EXPECT_EQ(first_ids.size(), 50u);
  }
  auto db = OpenDb(dir.path());  // the retry comes from a new process
  IngestResult result;
  std::vector<int64_t> ids;
  ASSERT_TRUE(db->Ingest("c", batch, &ids, &result).ok());
  EXPECT_TRUE(result.replayed);
  EXPECT_EQ(ids, first_ids);
  EXPECT_EQ(StatsOf(db.get(), "c").items, 50);
  // The same token for other data is refused and writes nothing.
  Batch other = RandomBatch(spec, 50, 0, 2);
  IngestBatch different = other.ingest();
  different.ids = nullptr;
  different.token = batch.token;
  Status s = db->Ingest("c", different, &ids, &result);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("different batch"), std::string::npos);
  EXPECT_EQ(StatsOf(db.get(), "c").items, 50);
  // Without a token the same data is a new batch.
  batch.token.clear();
  ASSERT_TRUE(db->Ingest("c", batch, &ids, &result).ok());
  EXPECT_FALSE(result.replayed);
  EXPECT_EQ(StatsOf(db.get(), "c").items, 100);
  // A dropped collection forgets its tokens.
  batch.token = "upload-2026-11-23-0001";
  ASSERT_TRUE(db->DropCollection("c").ok());
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  ASSERT_TRUE(db->Ingest("c", batch, &ids, &result).ok());
  EXPECT_FALSE(result.replayed);
}

TEST(StoreSafetyTest, MissingCurrentIsNeverOverwrittenByCreate) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "Flat");
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 30, 0, 1).ingest(), nullptr).ok());
  }
  ASSERT_TRUE(std::filesystem::remove(dir.path() + "/store/CURRENT"));
  std::unique_ptr<DB> db;
  Status s = DB::Open(Options(), dir.path(), &db);  // create_if_missing is the default
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("CURRENT"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("repair"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/store/CURRENT"));
  // Every other open says the same, and names the way out: read-only, a
  // reader beside a writer, and a check, which reports it as its first
  // problem.
  Options read_only;
  read_only.read_only = true;
  s = DB::Open(read_only, dir.path(), &db);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("hedgedb repair"), std::string::npos) << s.message();
  VerifyReport report;
  ASSERT_TRUE(VerifyDB(dir.path(), "", &report).ok());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.problems[0].kind, "store_unreadable");
  EXPECT_NE(report.problems[0].detail.find("hedgedb repair"), std::string::npos)
      << report.problems[0].detail;
  // The command line: list, search and verify fail naming repair; verify
  // prints its JSON report first.
  TempDir scratch;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list", "--db", dir.path()},
        std::vector<std::string>{"stats", "--db", dir.path(), "--read-only"},
        std::vector<std::string>{"verify", "--db", dir.path()}}) {
    cli_testing::CliRun r = cli_testing::RunHedgedb(scratch.path(), args);
    EXPECT_EQ(r.exit_code, 1) << cli_testing::DescribeRun(args, r);
    EXPECT_NE(r.err.find("hedgedb repair"), std::string::npos) << cli_testing::DescribeRun(args, r);
    if (args[0] == "verify") {
      const std::vector<nlohmann::json> lines = cli_testing::JsonLines(r.out, true);
      ASSERT_EQ(lines.size(), 1u) << r.out;
      EXPECT_EQ(lines[0]["problems"][0]["kind"], "store_unreadable");
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/store/CURRENT"));
  // Repair brings every record back.
  ASSERT_TRUE(RepairDB(dir.path()).ok());
  db = OpenDb(dir.path());
  ASSERT_TRUE(db);
  EXPECT_EQ(StatsOf(db.get(), "c").items, 30);
  ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 20, 30, 2).ingest(), nullptr).ok());
  db.reset();
  // Without CURRENT and MANIFEST, RocksDB's repair rebuilds the store from
  // its tables and logs (the last batch is only in a log).
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/store")) {
    const std::string name = e.path().filename().string();
    if (name == "CURRENT" || name.rfind("MANIFEST-", 0) == 0) std::filesystem::remove(e.path());
  }
  ASSERT_TRUE(RepairDB(dir.path()).ok());
  db = OpenDb(dir.path());
  ASSERT_TRUE(db);
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.items, 50);
  EXPECT_EQ(st.max_id, 49);
}

TEST(StoreSafetyTest, CorruptIndexLengthIsCheckedBeforeAllocating) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 8, "Flat");
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", RandomBatch(spec, 30, 0, 1).ingest(), nullptr).ok());
  }
  const std::string file = OnlyIndexFile(dir.path());
  {  // the blob length (bytes 32..39) claims 2^62 bytes
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(32);
    const uint64_t huge = uint64_t(1) << 62;
    f.write(reinterpret_cast<const char*>(&huge), 8);
  }
  auto db = OpenDb(dir.path());
  CollectionStats st = StatsOf(db.get(), "c");  // no bad_alloc: rebuilt
  EXPECT_EQ(st.items, 30);
  EXPECT_NE(st.index_note.find("truncated"), std::string::npos) << st.index_note;
}

TEST(StoreSafetyTest, IndexFileOfAnotherCollectionIsNotUsed) {
  TempDir dir;
  CollectionSpec g = MakeSpec("g", Kind::kGaussian, 8, "Flat");
  CollectionSpec h = MakeSpec("h", Kind::kGaussian, 8, "Flat");
  Batch gi = RandomBatch(g, 30, 0, 1), hi = RandomBatch(h, 30, 0, 2);
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(g).ok());
    ASSERT_TRUE(db->CreateCollection(h).ok());
    ASSERT_TRUE(db->Ingest("g", gi.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Ingest("h", hi.ingest(), nullptr).ok());
  }
  std::filesystem::copy_file(dir.path() + "/index/2.hidx", dir.path() + "/index/1.hidx",
                             std::filesystem::copy_options::overwrite_existing);
  auto db = OpenDb(dir.path());
  CollectionStats st = StatsOf(db.get(), "g");
  EXPECT_NE(st.index_note.find("another collection"), std::string::npos) << st.index_note;
  ExpectItemsFindThemselves(db.get(), "g", gi, 5);
}

}  // namespace
}  // namespace hedgedb

namespace hedgedb {
namespace {

// Unclustered data needs many more IVF lists probed than clustered data; the
// default nprobe is fitted when the index is trained, and kept across reopen.
TEST(StageOneTuningTest, DefaultNprobeFitsUnclusteredData) {
  TempDir dir;
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 16, "IVF64,Flat");
  Batch items = RandomBatch(spec, 6000, 0, 5);  // i.i.d. means: no clusters
  Batch queries = RandomBatch(spec, 50, 0, 6);
  SearchOptions two;
  two.k = 10;
  two.score = ScoreType::kCsd;  // what stage 1 ranks by: isolates stage 1
  two.with_uncertainty = false;
  auto recall = [&](DB* db) { return RecallAgainstExhaustive(db, "c", queries, two); };
  int tuned = 0;
  {
    auto db = OpenDb(dir.path());
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    CollectionStats st = StatsOf(db.get(), "c");
    tuned = st.index_nprobe;
    EXPECT_GT(tuned, 8);  // the static default, far too few lists here
    EXPECT_GE(st.index_recall_estimate, 0.95);
    EXPECT_GE(recall(db.get()), 0.9);
    two.nprobe = 8;  // what the static default would have given
    EXPECT_LT(recall(db.get()), 0.9);
    two.nprobe = 0;
  }
  auto db = OpenDb(dir.path());
  CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_EQ(st.index_nprobe, tuned);
  EXPECT_GE(st.index_recall_estimate, 0.95);
  EXPECT_GE(recall(db.get()), 0.9);
}

}  // namespace
}  // namespace hedgedb
