// The record store's codec and its corruption checks, and how the DB reacts to
// a damaged record: the collection reports corruption, others keep working.
#include "storage/record_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engine/engine_test_util.h"

namespace hedgedb {
namespace {

using testing::MakeSpec;
using testing::RandomBatch;
using testing::TempDir;

TEST(RecordCodecTest, RoundTripAndChecks) {
  float row[4] = {1.5f, -2.0f, 3.25f, 0.5f};
  storage::RecordWrite w;
  w.id = -42;
  w.has_label = true;
  w.label = 7;
  w.row = row;
  std::string key = storage::RecordStore::RecordKey(3, -42);
  std::string value = storage::RecordStore::EncodeRecord(99, w, sizeof(row));
  storage::StoredRecord r;
  ASSERT_TRUE(storage::RecordStore::DecodeRecord(key, value, sizeof(row), &r).ok());
  EXPECT_EQ(r.id, -42);
  EXPECT_EQ(r.sequence, 99u);
  EXPECT_TRUE(r.has_label);
  EXPECT_EQ(r.label, 7);
  EXPECT_EQ(std::memcmp(r.row.data(), row, sizeof(row)), 0);

  for (size_t i = 0; i < value.size(); ++i) {  // every single-byte flip is caught
    std::string bad = value;
    bad[i] = char(bad[i] ^ 0x01);
    EXPECT_TRUE(storage::RecordStore::DecodeRecord(key, bad, sizeof(row), &r).IsCorruption()) << i;
  }
  EXPECT_TRUE(
      storage::RecordStore::DecodeRecord(key, value.substr(0, 10), sizeof(row), &r).IsCorruption());
  EXPECT_TRUE(storage::RecordStore::DecodeRecord(key, value, 8, &r).IsCorruption());
}

// The metadata survives the descriptor; an empty one is not written, so that
// descriptors without metadata keep their bytes, and old ones read as empty.
TEST(SpecCodecTest, MetadataRoundTrip) {
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4);
  const std::string plain = storage::SpecToJson(spec);
  EXPECT_EQ(plain.find("metadata"), std::string::npos);
  CollectionSpec read;
  ASSERT_TRUE(storage::SpecFromJson(plain, &read).ok());
  EXPECT_TRUE(read.metadata.empty());
  spec.metadata = "{\"images\": {\"fit\": \"resize\"}}";
  ASSERT_TRUE(storage::SpecFromJson(storage::SpecToJson(spec), &read).ok());
  EXPECT_EQ(read.metadata, spec.metadata);
}

// The row format: absent for float32, so that descriptors written before
// row formats existed keep their bytes and read back as float32; the
// compact formats by name; an unknown name is damage.
TEST(SpecCodecTest, RowFormatRoundTrip) {
  CollectionSpec spec = MakeSpec("c", Kind::kGaussian, 4);
  const std::string plain = storage::SpecToJson(spec);
  EXPECT_EQ(plain.find("row_format"), std::string::npos);
  CollectionSpec read;
  read.row_format = RowFormat::kBfloat16;
  ASSERT_TRUE(storage::SpecFromJson(plain, &read).ok());
  EXPECT_EQ(read.row_format, RowFormat::kFloat32);
  for (RowFormat f : {RowFormat::kFloat16, RowFormat::kBfloat16}) {
    spec.row_format = f;
    const std::string text = storage::SpecToJson(spec);
    EXPECT_NE(text.find(std::string("\"row_format\":\"") + RowFormatName(f) + "\""),
              std::string::npos)
        << text;
    ASSERT_TRUE(storage::SpecFromJson(text, &read).ok());
    EXPECT_EQ(read.row_format, f);
  }
  std::string bad = storage::SpecToJson(spec);
  bad.replace(bad.find("bfloat16"), 8, "float8");
  const Status s = storage::SpecFromJson(bad, &read);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.ToString().find("unknown row_format \"float8\""), std::string::npos) << s.ToString();
}

// Integer fields of a stored spec must be JSON integers in int's range: 2.5
// is not read as 2, nor 1e10 wrapped.
// Integer fields must be integers, float fields finite floats.
TEST(SpecCodecTest, IntegerFieldsMustBeIntegers) {
  const CollectionSpec spec = MakeSpec("c", Kind::kMog, 4);
  CollectionSpec read;
  ASSERT_TRUE(storage::SpecFromJson(storage::SpecToJson(spec), &read).ok());
  EXPECT_EQ(read.dim, 4);
  EXPECT_EQ(read.components, 2);
  EXPECT_EQ(read.seed, spec.seed);
  const std::string text = storage::SpecToJson(spec);
  auto with = [&](const std::string& field, const std::string& value) {
    const std::string key = "\"" + field + "\":";
    const size_t at = text.find(key) + key.size();
    return text.substr(0, at) + value + text.substr(text.find_first_of(",}", at));
  };
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"dim", "2.5"},
                                                        {"dim", "10000000000"},
                                                        {"components", "\"2\""},
                                                        {"samples", "-1e3"},
                                                        {"seed", "-1"},
                                                        // beyond float: would read as inf
                                                        {"match_a", "6.6e55"},
                                                        {"match_b", "-1e39"},
                                                        {"match_a", "\"1\""}}) {
    Status s = storage::SpecFromJson(with(field, value), &read);
    EXPECT_TRUE(s.IsCorruption()) << field << "=" << value << ": " << s.ToString();
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  }
}

TEST(RecordCodecTest, KeysSortByCollectionThenSignedId) {
  using storage::RecordStore;
  EXPECT_LT(RecordStore::RecordKey(1, -5), RecordStore::RecordKey(1, -4));
  EXPECT_LT(RecordStore::RecordKey(1, -1), RecordStore::RecordKey(1, 0));
  EXPECT_LT(RecordStore::RecordKey(1, 255), RecordStore::RecordKey(1, 256));
  EXPECT_LT(RecordStore::RecordKey(1, INT64_MAX), RecordStore::RecordKey(2, INT64_MIN));
}

TEST(RecordStoreTest, DamagedRecordMakesItsCollectionReportCorruption) {
  TempDir dir;
  {
    std::unique_ptr<DB> db;
    ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
    ASSERT_TRUE(db->CreateCollection(MakeSpec("c", Kind::kGaussian, 4)).ok());
    ASSERT_TRUE(db->CreateCollection(MakeSpec("other", Kind::kPoint, 4)).ok());
    ASSERT_TRUE(
        db->Ingest("c", RandomBatch(MakeSpec("c", Kind::kGaussian, 4), 10, 0, 1).ingest(), nullptr)
            .ok());
  }
  {
    std::unique_ptr<storage::RecordStore> store;
    ASSERT_TRUE(
        storage::RecordStore::Open(storage::StoreOptions(), dir.path() + "/store", &store).ok());
    std::vector<storage::CollectionMeta> metas;
    ASSERT_TRUE(store->LoadCatalog(&metas).ok());
    ASSERT_EQ(metas.size(), 2u);
    const auto& meta = metas[0].spec.name == "c" ? metas[0] : metas[1];
    storage::StoredRecord rec;
    bool found = false;
    ASSERT_TRUE(store->GetRecord(meta, 4, &rec, &found).ok());
    ASSERT_TRUE(found);
    float row[8] = {};
    storage::RecordWrite w;
    w.id = 4;
    w.row = row;
    std::string value = storage::RecordStore::EncodeRecord(rec.sequence, w, sizeof(row));
    value[30] = char(value[30] ^ 0xFF);  // a bit rot inside the row
    ASSERT_TRUE(
        store->PutRawRecordForTest(storage::RecordStore::RecordKey(meta.id, 4), value).ok());
    EXPECT_TRUE(store->GetRecord(meta, 4, &rec, &found).IsCorruption());
  }
  // With its arena snapshot an open reads no record (verify checks them);
  // without it, the open reads them all and finds the damage.
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/index")) {
    if (e.path().extension() == ".harena") std::filesystem::remove(e.path());
  }
  std::unique_ptr<DB> db;
  ASSERT_TRUE(DB::Open(Options(), dir.path(), &db).ok());
  CollectionStats st;
  Status s = db->GetStats("c", &st);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("item 4"), std::string::npos) << s.ToString();
  EXPECT_TRUE(db->GetStats("other", &st).ok());
}

}  // namespace
}  // namespace hedgedb
