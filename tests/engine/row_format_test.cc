// Compact rows (CollectionSpec::row_format) through the engine: a float16 or
// bfloat16 collection stores each item's values rounded, in half the bytes
// (records and arena alike), and scores exactly as a float32 collection of
// the rounded values does, bitwise, through ingest, upsert, delete, reopen
// from the arena snapshot and from the records; verify checks its files;
// values the format cannot hold are refused and nothing is written; so are
// coarse values that a half-float index (SQfp16) cannot hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/row_layout.h"
#include "engine_test_util.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace testing {
namespace {

CollectionSpec Spec(const std::string& name, Kind kind, RowFormat format) {
  CollectionSpec s;
  s.name = name;
  s.kind = kind;
  s.dim = 12;
  s.components = kind == Kind::kMog ? 2 : 1;
  s.samples = kind == Kind::kMog ? 8 : 8;
  s.match_a = 1.5f;
  s.match_b = 3.0f;
  s.index_factory = "IVF4,Flat";
  s.row_format = format;
  return s;
}

// The batch's values as the collection stores them: what get returns. The
// mixture weights stay the batch's (float32 in either format: normalising
// the stored ones again could move them by an ulp).
Batch Stored(DB* db, const std::string& name, const Batch& b) {
  std::vector<Record> records;
  EXPECT_TRUE(db->Get(name, b.ids.data(), b.ids.size(), &records).ok());
  Batch out = b;
  out.vec.clear();
  out.mean.clear();
  out.var.clear();
  for (const Record& r : records) {
    EXPECT_TRUE(r.found);
    out.vec.insert(out.vec.end(), r.vec.begin(), r.vec.end());
    out.mean.insert(out.mean.end(), r.mean.begin(), r.mean.end());
    out.var.insert(out.var.end(), r.var.begin(), r.var.end());
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct Case {
  Kind kind;
  RowFormat format;
};

class RowFormatTest : public ::testing::TestWithParam<Case> {};

// Every score a search returns, for every score type of the kind, both
// stages: equal bitwise between the compact collection and the float32 one
// holding its rounded values.
void ExpectSameSearches(DB* db, const CollectionSpec& spec, const Batch& queries) {
  std::vector<ScoreType> scores = {ScoreType::kDefault, ScoreType::kL2};
  if (spec.kind != Kind::kPoint) {
    scores.insert(scores.end(), {ScoreType::kCsd, ScoreType::kMls, ScoreType::kMatch});
  }
  for (ScoreType score : scores) {
    for (bool exhaustive : {true, false}) {
      SearchOptions o;
      o.k = 10;
      o.score = score;
      o.exhaustive = exhaustive;
      std::vector<SearchResult> a, b;
      ASSERT_TRUE(db->Search("c", queries.view(), o, &a).ok());
      ASSERT_TRUE(db->Search("f", queries.view(), o, &b).ok());
      ASSERT_EQ(a.size(), b.size());
      for (size_t q = 0; q < a.size(); ++q) {
        ASSERT_EQ(a[q].hits.size(), b[q].hits.size());
        for (size_t h = 0; h < a[q].hits.size(); ++h) {
          const SearchHit &x = a[q].hits[h], &y = b[q].hits[h];
          EXPECT_EQ(x.id, y.id) << ScoreName(score) << " q " << q << " h " << h;
          EXPECT_EQ(x.score, y.score) << ScoreName(score);
          if (!std::isnan(y.uncertainty)) {
            EXPECT_EQ(x.uncertainty, y.uncertainty);
          }
          if (!std::isnan(y.std_error)) {
            EXPECT_EQ(x.std_error, y.std_error);
          }
        }
      }
    }
  }
}

TEST_P(RowFormatTest, ScoresEqualFloat32OfTheRoundedRowsThroughEveryPath) {
  const Case c = GetParam();
  TempDir dir;
  const std::string path = dir.path() + "/db";
  const CollectionSpec spec = Spec("c", c.kind, c.format);
  CollectionSpec f32 = Spec("f", c.kind, RowFormat::kFloat32);
  const Batch items = RandomBatch(spec, 300, 1, 7);
  Batch queries = RandomBatch(spec, 6, 5000, 8);
  {
    auto db = OpenDb(path);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->CreateCollection(f32).ok());
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
    const Batch stored = Stored(db.get(), "c", items);
    // The stored values are the rounded inputs (mixture weights as given,
    // normalised in float32).
    const std::vector<float>& in = c.kind == Kind::kPoint ? items.vec : items.mean;
    const std::vector<float>& out = c.kind == Kind::kPoint ? stored.vec : stored.mean;
    ASSERT_EQ(in.size(), out.size());
    size_t changed = 0;
    for (size_t j = 0; j < in.size(); ++j) {
      const float want = c.format == RowFormat::kFloat16 ? HalfToFloat(FloatToHalf(in[j]))
                                                         : Bfloat16ToFloat(FloatToBfloat16(in[j]));
      ASSERT_EQ(out[j], want) << j;
      changed += out[j] != in[j];
    }
    EXPECT_GT(changed, in.size() / 2);  // the rounding is real
    ASSERT_TRUE(db->Ingest("f", stored.ingest(), nullptr).ok());
    ExpectSameSearches(db.get(), spec, queries);

    // Upsert (ids 1..20 replaced by other values) and delete (21..30).
    Batch next = RandomBatch(spec, 20, 1, 9);
    IngestBatch up = next.ingest();
    up.upsert = true;
    ASSERT_TRUE(db->Ingest("c", up, nullptr).ok());
    Batch next_stored = Stored(db.get(), "c", next);
    IngestBatch up_f = next_stored.ingest();
    up_f.upsert = true;
    ASSERT_TRUE(db->Ingest("f", up_f, nullptr).ok());
    std::vector<int64_t> gone;
    for (int64_t id = 21; id <= 30; ++id) gone.push_back(id);
    ASSERT_TRUE(db->Remove("c", gone.data(), gone.size(), nullptr).ok());
    ASSERT_TRUE(db->Remove("f", gone.data(), gone.size(), nullptr).ok());
    ExpectSameSearches(db.get(), spec, queries);
    ASSERT_TRUE(db->Flush().ok());
  }
  const size_t row_bytes = RowShapeOf(spec).item_row_bytes();
  EXPECT_EQ(row_bytes, RowShapeOf(f32).item_row_bytes() / 2 +
                           (c.kind == Kind::kMog ? 2 * sizeof(float) / 2 : 0));
  {
    // Reopened from the arena snapshot: rows of the compact length mapped.
    auto db = OpenDb(path);
    const CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_EQ(st.arena_source, "snapshot");
    EXPECT_EQ(st.spec.row_format, c.format);
    EXPECT_EQ(st.arena_mapped_bytes, int64_t(st.items * row_bytes));
    ExpectSameSearches(db.get(), spec, queries);
    VerifyReport report;
    ASSERT_TRUE(db->Verify("", &report).ok());
    EXPECT_TRUE(report.ok());
  }
  // Reopened from the records (no snapshot).
  const std::string arena_dir = path + "/index";
  std::string compact_arena;
  for (const auto& e : std::filesystem::directory_iterator(arena_dir)) {
    if (e.path().extension() != ".harena") continue;
    const std::string bytes = ReadFile(e.path().string());
    // The compact collection's snapshot records its format (version 2,
    // format field at byte 56).
    uint32_t version = 0, format = 0;
    std::memcpy(&version, bytes.data() + 8, 4);
    std::memcpy(&format, bytes.data() + 56, 4);
    EXPECT_EQ(version, 2u);
    if (format == uint32_t(c.format)) compact_arena = e.path().string();
    std::filesystem::remove(e.path());
  }
  ASSERT_FALSE(compact_arena.empty());
  {
    auto db = OpenDb(path);
    EXPECT_EQ(StatsOf(db.get(), "c").arena_source, "records");
    ExpectSameSearches(db.get(), spec, queries);
  }
  // A byte of a row flipped in the snapshot: verify finds it, the open
  // reads the records instead.
  std::string bytes = ReadFile(compact_arena);
  ASSERT_GT(bytes.size(), 65536u);
  bytes[65536 + 3] = char(bytes[65536 + 3] ^ 0x10);
  WriteFile(compact_arena, bytes);
  {
    VerifyReport report;
    ASSERT_TRUE(VerifyDB(path, "", &report).ok());
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.problems[0].kind, "arena_corrupt");
    auto db = OpenDb(path);
    EXPECT_EQ(StatsOf(db.get(), "c").arena_source, "records");
    ExpectSameSearches(db.get(), spec, queries);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, RowFormatTest,
                         ::testing::Values(Case{Kind::kPoint, RowFormat::kFloat16},
                                           Case{Kind::kGaussian, RowFormat::kFloat16},
                                           Case{Kind::kMog, RowFormat::kFloat16},
                                           Case{Kind::kPoint, RowFormat::kBfloat16},
                                           Case{Kind::kGaussian, RowFormat::kBfloat16},
                                           Case{Kind::kMog, RowFormat::kBfloat16}));

// What float16 cannot hold is refused, naming the value and the item, and
// nothing of the batch is stored; bfloat16 takes it.
TEST(RowFormatRangeTest, Float16RefusesWhatItCannotHold) {
  TempDir dir;
  auto db = OpenDb(dir.path() + "/db");
  CollectionSpec spec = Spec("h", Kind::kGaussian, RowFormat::kFloat16);
  spec.dim = 2;
  ASSERT_TRUE(db->CreateCollection(spec).ok());
  Batch b = RandomBatch(spec, 3, 1, 1);
  b.mean[5] = -65505.0f;  // item 2, element 1
  Status s = db->Ingest("h", b.ingest(), nullptr);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("mean -65505 of item 2 (element 1) is outside the range of the "
                              "collection's row format float16 (largest magnitude 65504)"),
            std::string::npos)
      << s.ToString();
  b = RandomBatch(spec, 3, 1, 1);
  b.var[2] = 2.9e-8f;  // below 2^-25, half the smallest subnormal: it would round to 0
  s = db->Ingest("h", b.ingest(), nullptr);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("variance 2.9e-08 of item 1 (element 0) rounds to 0 in the "
                              "collection's row format float16 (smallest positive value "
                              "5.9604645e-08)"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(StatsOf(db.get(), "h").items, 0);
  // The limits themselves are taken: the largest half, and variances down to
  // the smallest subnormal (below the smallest normal, 2^-14, they are kept
  // as subnormals).
  b.var[2] = kFloat16MinPositive;
  b.var[3] = 6.0e-5f;  // just below 2^-14: a subnormal
  b.mean[0] = kFloat16Max;
  ASSERT_TRUE(db->Ingest("h", b.ingest(), nullptr).ok());
  EXPECT_EQ(StatsOf(db.get(), "h").items, 3);

  CollectionSpec bf = Spec("b", Kind::kGaussian, RowFormat::kBfloat16);
  bf.dim = 2;
  ASSERT_TRUE(db->CreateCollection(bf).ok());
  b = RandomBatch(bf, 3, 1, 1);
  b.mean[5] = -65505.0f;
  b.var[2] = 1e-30f;
  ASSERT_TRUE(db->Ingest("b", b.ingest(), nullptr).ok());
  b.mean[0] = 3.4e38f;  // rounds past bfloat16's largest (3.3895e38)
  s = db->Ingest("b", b.ingest(), nullptr);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("row format bfloat16"), std::string::npos) << s.ToString();

  // Codes are bytes: a compact format is refused at create.
  CollectionSpec codes;
  codes.name = "k";
  codes.kind = Kind::kCodes;
  codes.dim = 4;
  codes.code_k = 4;
  codes.row_format = RowFormat::kFloat16;
  s = db->CreateCollection(codes);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("codes are stored as bytes"), std::string::npos) << s.ToString();
}

// A half-float coarse index (SQfp16) would store a coarse value beyond 65504
// as an infinity, and searches would miss the item silently. Ingest and
// upsert refuse the whole batch instead, naming the item, the coarse
// dimension and the value, and the store stays as it was. The limit: 65504
// where the index stores the values (flat, HNSW), 32736 under an IVF, which
// stores the value less its list's centroid (index/factory_rules.cc).
TEST(CoarseRangeTest, HalfFloatIndexesRefuseCoarseValuesTheyCannotHold) {
  struct Case {
    std::string factory;
    float limit;
  };
  for (const Case& c :
       {Case{"SQfp16", 65504.0f}, Case{"HNSW8,SQfp16", 65504.0f}, Case{"IVF4,SQfp16", 32736.0f}}) {
    SCOPED_TRACE(c.factory);
    TempDir dir;
    auto db = OpenDb(dir.path() + "/db");
    CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4, c.factory);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    // ids 0..1199: IVF4 trains at 156 items, scalar quantizers at 1,000.
    // One variance for all: the mutual likelihood score then ranks by the
    // distance of the means, so each item's own mean finds it first.
    Batch first = RandomBatch(spec, 1200, 0, 1);
    std::fill(first.var.begin(), first.var.end(), 0.1f);
    ASSERT_TRUE(db->Ingest("c", first.ingest(), nullptr).ok());
    ASSERT_TRUE(db->Flush().ok());
    ASSERT_TRUE(StatsOf(db.get(), "c").index_trained);

    auto refused = [&](const IngestBatch& b, const std::string& expected) {
      Status s = db->Ingest("c", b, nullptr);
      EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
      EXPECT_NE(s.ToString().find(expected), std::string::npos) << s.ToString();
      const std::string why = c.limit == kFloat16Max
                                  ? "it stores half floats (largest magnitude 65504)"
                                  : "so values must lie within +-32736";
      EXPECT_NE(s.ToString().find(why), std::string::npos) << s.ToString();
    };
    Batch b = RandomBatch(spec, 3, 5000, 2);
    b.mean[1 * 4 + 2] = 70000.0f;  // item id 5001, coarse dimension 2
    refused(b.ingest(), "mean 70000 of item id 5001 (coarse dimension 2) is outside what index '" +
                            c.factory + "' holds");
    b.mean[1 * 4 + 2] = -70000.0f;
    refused(b.ingest(), "mean -70000 of item id 5001 (coarse dimension 2)");
    // The limit's next float, without ids: named by the place in the batch.
    b = RandomBatch(spec, 3, 5000, 2);
    b.mean[2 * 4 + 0] = -std::nextafter(c.limit, 1e9f);
    IngestBatch no_ids = b.ingest();
    no_ids.ids = nullptr;
    refused(no_ids, "of item 2 of the batch (coarse dimension 0)");
    // The last coarse dimension, sqrt(tr S): variances summing past 65504^2.
    b = RandomBatch(spec, 3, 5000, 2);
    for (int d = 0; d < 4; ++d) b.var[4 + d] = 2e9f;
    refused(b.ingest(),
            "square root of the summed variances 89442.72 of item id 5001 "
            "(coarse dimension 4)");
    // An upsert of an item that exists.
    Batch up = RandomBatch(spec, 2, 5, 3);  // ids 5, 6
    up.mean[4 + 3] = 70000.0f;
    IngestBatch upsert = up.ingest();
    upsert.upsert = true;
    refused(upsert, "mean 70000 of item id 6 (coarse dimension 3)");

    // Nothing of those batches was written; the items are as they were.
    CollectionStats st = StatsOf(db.get(), "c");
    EXPECT_EQ(st.items, 1200);
    EXPECT_FALSE(st.index_stale);
    std::vector<Record> records;
    const int64_t ids[] = {5, 6, 5001};
    ASSERT_TRUE(db->Get("c", ids, 3, &records).ok());
    EXPECT_TRUE(records[0].found);
    EXPECT_TRUE(records[1].found);
    EXPECT_FALSE(records[2].found);
    EXPECT_EQ(records[1].mean[3], first.mean[6 * 4 + 3]);

    // Values up to the limit are taken, indexed, and found by a two-stage
    // search (the index holds them, not infinities).
    Batch edge = RandomBatch(spec, 2, 6000, 4);
    std::fill(edge.var.begin(), edge.var.end(), 0.1f);
    edge.mean[0] = c.limit;
    edge.mean[4 + 1] = -c.limit;
    Status s = db->Ingest("c", edge.ingest(), nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    st = StatsOf(db.get(), "c");
    EXPECT_EQ(st.items, 1202);
    EXPECT_EQ(st.index_vectors, 1202);
    EXPECT_FALSE(st.index_stale) << st.index_note;
    SearchOptions o;
    o.k = 10;
    o.with_uncertainty = false;
    o.score = ScoreType::kMls;
    for (const int64_t item : {int64_t(6000), int64_t(6001), int64_t(7)}) {
      const Batch& from = item == 7 ? first : edge;
      const int64_t row = item == 7 ? 7 : item - 6000;
      EmbeddingView q = from.view();
      q.mean += row * 4;
      q.var += row * 4;
      q.n = 1;
      std::vector<SearchResult> r;
      ASSERT_TRUE(db->Search("c", q, o, &r).ok());
      ASSERT_FALSE(r[0].hits.empty());
      EXPECT_EQ(r[0].hits[0].id, item);
    }
  }
}

// An item that reaches a half-float index without passing ingest's check (a
// record written before it existed, here written into the store directly)
// is not added as an infinity: the index's add refuses it, naming it, the
// index is stale, and searches score every item exactly, the item included.
TEST(CoarseRangeTest, AnItemThatReachesTheIndexOtherwiseLeavesItStaleNotWrong) {
  TempDir dir;
  const std::string path = dir.path() + "/db";
  const CollectionSpec spec = MakeSpec("c", Kind::kPoint, 4, "SQfp16");
  const Batch items = RandomBatch(spec, 1200, 0, 1);
  {
    auto db = OpenDb(path);
    ASSERT_TRUE(db->CreateCollection(spec).ok());
    ASSERT_TRUE(db->Ingest("c", items.ingest(), nullptr).ok());
  }
  const std::vector<float> far = {1.0f, 70000.0f, 1.0f, 1.0f};
  {
    std::unique_ptr<storage::RecordStore> store;
    storage::StoreOptions so;
    so.create_if_missing = false;
    ASSERT_TRUE(storage::RecordStore::Open(so, path + "/store", &store).ok());
    std::vector<storage::CollectionMeta> metas;
    ASSERT_TRUE(store->LoadCatalog(&metas).ok());
    ASSERT_EQ(ItemRowBytes(spec), far.size() * sizeof(float));
    storage::RecordWrite w;
    w.id = 7;
    w.row = reinterpret_cast<const uint8_t*>(far.data());
    ASSERT_TRUE(store
                    ->PutRawRecordForTest(storage::RecordStore::RecordKey(metas[0].id, 7),
                                          storage::RecordStore::EncodeRecord(metas[0].sequence, w,
                                                                             ItemRowBytes(spec)))
                    .ok());
  }
  // No index file or arena snapshot: the next open reads the records and
  // builds the index from them.
  for (const auto& e : std::filesystem::directory_iterator(path + "/index")) {
    std::filesystem::remove(e.path());
  }
  auto db = OpenDb(path);
  const CollectionStats st = StatsOf(db.get(), "c");
  EXPECT_TRUE(st.index_stale);
  EXPECT_NE(st.index_note.find("vector value 70000 of item id 7 (coarse dimension 1) is outside "
                               "what index 'SQfp16' holds"),
            std::string::npos)
      << st.index_note;
  SearchOptions o;
  o.k = 3;
  o.score = ScoreType::kL2;
  o.with_uncertainty = false;
  Batch q;
  q.n = 2;
  q.vec = far;
  q.vec.insert(q.vec.end(), items.vec.begin() + 4 * 4, items.vec.begin() + 5 * 4);  // item 4
  std::vector<SearchResult> r;
  ASSERT_TRUE(db->Search("c", q.view(), o, &r).ok());
  ASSERT_EQ(r.size(), 2u);
  ASSERT_FALSE(r[0].hits.empty());
  EXPECT_EQ(r[0].hits[0].id, 7);
  ASSERT_FALSE(r[1].hits.empty());
  EXPECT_EQ(r[1].hits[0].id, 4);
}

}  // namespace
}  // namespace testing
}  // namespace hedgedb
