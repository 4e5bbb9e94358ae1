// RowTable (query/row_table.h): appended rows keep their ids, labels and
// sequence numbers; retired ids leave the live rows and the id map but keep
// their row; what an index adds (GatherLive, GatherNewer) is exactly the
// rows asked for; the arena snapshot round-trips the live rows and a
// refused snapshot leaves the table empty.
#include "query/row_table.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "query/arena_file.h"
#include "temp_dir.h"

namespace hedgedb {
namespace query {
namespace {

constexpr size_t kRowBytes = 24;

// The row of item id: every byte a function of (id, byte).
std::vector<uint8_t> RowBytes(int64_t id) {
  std::vector<uint8_t> row(kRowBytes);
  for (size_t b = 0; b < kRowBytes; ++b) row[b] = uint8_t((id * 131 + int64_t(b) * 7 + 3) & 0xFF);
  return row;
}

// Ten items with ids 1000 + 10 i, label i % 3 (none for i = 4), written by
// batches 1 (i < 5) and 2.
void Fill(RowTable* t) {
  for (int64_t i = 0; i < 10; ++i) {
    const int64_t id = 1000 + 10 * i;
    t->Append(id, i != 4, i % 3, RowBytes(id).data(), i < 5 ? 1 : 2);
  }
}

TEST(RowTableTest, AppendRetireAndLookUp) {
  RowTable t(kRowBytes);
  Fill(&t);
  EXPECT_EQ(t.rows(), 10);
  EXPECT_EQ(t.live_count(), 10);
  EXPECT_EQ(t.RowOf(1030), 3);
  EXPECT_EQ(t.RowOf(1031), -1);
  EXPECT_FALSE(t.has_label(4));
  EXPECT_TRUE(t.has_label(5));
  EXPECT_EQ(t.labels()[5], 2);
  EXPECT_EQ(t.sequences()[4], 1u);
  EXPECT_EQ(t.sequences()[5], 2u);
  EXPECT_EQ(std::memcmp(t.arena().row(7), RowBytes(1070).data(), kRowBytes), 0);

  t.Retire({1030, 1070});
  EXPECT_EQ(t.rows(), 10);  // the rows stay, dead
  EXPECT_EQ(t.live_count(), 8);
  EXPECT_FALSE(t.Contains(1030));
  EXPECT_EQ(t.RowOf(1070), -1);
  EXPECT_EQ(t.flags()[3] & kRowLive, 0);
  EXPECT_NE(t.flags()[3] & kRowHasLabel, 0);  // the label bit is kept
  EXPECT_EQ(t.live_rows(), (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 8, 9}));
  EXPECT_EQ(t.row_of_id().size(), 8u);

  // An id retired can come back (an upsert): a new row.
  t.Append(1030, true, 7, RowBytes(5).data(), 3);
  EXPECT_EQ(t.RowOf(1030), 10);
  EXPECT_EQ(t.live_rows().back(), 10);
  EXPECT_EQ(std::memcmp(t.arena().row(10), RowBytes(5).data(), kRowBytes), 0);
}

TEST(RowTableTest, GatherWhatAnIndexAdds) {
  RowTable t(kRowBytes);
  Fill(&t);
  t.Retire({1000, 1060});
  std::vector<uint8_t> rows;
  std::vector<int64_t> ids;
  // The live rows from row 5 on, back to back.
  t.GatherLive(&rows, &ids, 5);
  EXPECT_EQ(ids, (std::vector<int64_t>{1050, 1070, 1080, 1090}));
  ASSERT_EQ(rows.size(), 4 * kRowBytes);
  for (size_t j = 0; j < ids.size(); ++j) {
    EXPECT_EQ(std::memcmp(rows.data() + j * kRowBytes, RowBytes(ids[j]).data(), kRowBytes), 0);
  }
  t.GatherLive(&rows, &ids, 0);
  EXPECT_EQ(ids.size(), 8u);
  // Written after batch 1: the rows of batch 2, the dead one too (an index
  // file saved at 1 holds none of them).
  t.GatherNewer(1, &rows, &ids);
  EXPECT_EQ(ids, (std::vector<int64_t>{1050, 1060, 1070, 1080, 1090}));
  EXPECT_EQ(rows.size(), 5 * kRowBytes);
  t.GatherNewer(2, &rows, &ids);
  EXPECT_TRUE(ids.empty());
  EXPECT_TRUE(rows.empty());
}

TEST(RowTableTest, ReservedRowsAppendInPlace) {
  RowTable t(kRowBytes);
  Fill(&t);
  t.Reserve(5000);
  const uint8_t* base = t.arena().data();
  for (int64_t id = 0; id < 5000; ++id) t.Append(id, false, 0, RowBytes(id).data(), 3);
  EXPECT_EQ(t.arena().data(), base);
  EXPECT_EQ(t.rows(), 5010);
  EXPECT_EQ(t.RowOf(4999), 5009);
  EXPECT_EQ(std::memcmp(t.arena().row(5009), RowBytes(4999).data(), kRowBytes), 0);
  EXPECT_EQ(std::memcmp(t.arena().row(9), RowBytes(1090).data(), kRowBytes), 0);
}

class RowTableSnapshotTest : public testing_util::TempDirTest {};

TEST_F(RowTableSnapshotTest, LiveRowsRoundTrip) {
  RowTable t(kRowBytes);
  Fill(&t);
  t.Retire({1010, 1020, 1080});
  const std::string path = Path("1.harena");
  ASSERT_TRUE(t.WriteSnapshot(path, 2, 42).ok());

  RowTable back(kRowBytes);
  const Status s = back.LoadSnapshot(path, 42, 2, 1090);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(back.rows(), 7);  // the live rows only, in row order
  EXPECT_EQ(back.live_count(), 7);
  for (int64_t r = 0; r < 7; ++r) {
    const int64_t old = t.live_rows()[size_t(r)];
    EXPECT_EQ(back.ids()[size_t(r)], t.ids()[size_t(old)]);
    EXPECT_EQ(back.labels()[size_t(r)], t.labels()[size_t(old)]);
    EXPECT_EQ(back.has_label(r), t.has_label(old));
    EXPECT_EQ(back.sequences()[size_t(r)], t.sequences()[size_t(old)]);
    EXPECT_EQ(back.RowOf(t.ids()[size_t(old)]), r);
    EXPECT_EQ(std::memcmp(back.arena().row(r), t.arena().row(old), kRowBytes), 0);
  }
  EXPECT_FALSE(back.Contains(1010));
  // The loaded table takes appends after the mapped rows.
  back.Append(2000, true, 1, RowBytes(2000).data(), 3);
  EXPECT_EQ(back.RowOf(2000), 7);
  EXPECT_EQ(std::memcmp(back.arena().row(7), RowBytes(2000).data(), kRowBytes), 0);
}

TEST_F(RowTableSnapshotTest, RefusedSnapshotsLeaveTheTableEmpty) {
  RowTable t(kRowBytes);
  Fill(&t);
  const std::string path = Path("1.harena");
  ASSERT_TRUE(t.WriteSnapshot(path, 2, 42).ok());

  RowTable none(kRowBytes);
  EXPECT_TRUE(IsMissingArenaSnapshot(none.LoadSnapshot(Path("missing.harena"), 42, 2, 1090)));
  // Another sequence number, another binding: not this collection's rows.
  RowTable stale(kRowBytes);
  EXPECT_FALSE(stale.LoadSnapshot(path, 42, 3, 1090).ok());
  EXPECT_EQ(stale.rows(), 0);
  RowTable foreign(kRowBytes);
  EXPECT_FALSE(foreign.LoadSnapshot(path, 43, 2, 1090).ok());
  EXPECT_EQ(foreign.arena().rows(), 0);
  // An id past the collection's largest: damage, and nothing kept.
  RowTable past(kRowBytes);
  const Status s = past.LoadSnapshot(path, 42, 2, 1080);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("holds item 1090 twice or past the largest id"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(past.rows(), 0);
  EXPECT_EQ(past.arena().rows(), 0);
  EXPECT_FALSE(past.Contains(1000));
}

// float16 and bfloat16 rows have the same length: only the format recorded
// in the snapshot tells them apart, and a mismatch is refused by name.
TEST_F(RowTableSnapshotTest, RowFormatRecordedAndAMismatchRefused) {
  RowTable t(kRowBytes, RowFormat::kFloat16);
  Fill(&t);
  const std::string path = Path("1.harena");
  ASSERT_TRUE(t.WriteSnapshot(path, 2, 42).ok());
  RowTable same(kRowBytes, RowFormat::kFloat16);
  ASSERT_TRUE(same.LoadSnapshot(path, 42, 2, 1090).ok());
  EXPECT_EQ(same.rows(), 10);
  for (RowFormat other : {RowFormat::kBfloat16, RowFormat::kFloat32}) {
    RowTable wrong(kRowBytes, other);
    const Status s = wrong.LoadSnapshot(path, 42, 2, 1090);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.ToString().find(std::string("holds float16 rows, the collection's row format is ") +
                                RowFormatName(other)),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(wrong.rows(), 0);
    EXPECT_EQ(wrong.arena().rows(), 0);
  }
}

// A version-1 snapshot (written before row formats: a 60-byte header
// without the format field) still loads, as float32 rows, and only as such.
TEST_F(RowTableSnapshotTest, VersionOneSnapshotReadsAsFloat32) {
  RowTable t(kRowBytes);
  Fill(&t);
  const std::string path = Path("1.harena");
  ASSERT_TRUE(t.WriteSnapshot(path, 2, 42).ok());
  std::string bytes;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, got);
    std::fclose(f);
  }
  // Version 2 -> 1: drop the row format field (bytes 56..59), set the
  // version, recompute the header checksum, keep the rows at their offset.
  std::string v1 = bytes.substr(0, 56) + bytes.substr(60, 4) + bytes.substr(64);
  v1.insert(kArenaHeaderBytesV1 + 10 * 25, 4, '\0');  // padding keeps the rows' offset
  const uint32_t one = 1;
  std::memcpy(&v1[8], &one, 4);
  const uint32_t crc = Crc32c(v1.data() + 8, kArenaHeaderBytesV1 - 12);
  std::memcpy(&v1[kArenaHeaderBytesV1 - 4], &crc, 4);
  ASSERT_EQ(v1.size(), bytes.size());
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(v1.data(), 1, v1.size(), f), v1.size());
    std::fclose(f);
  }
  RowTable back(kRowBytes);
  const Status s = back.LoadSnapshot(path, 42, 2, 1090);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(back.rows(), 10);
  for (int64_t r = 0; r < 10; ++r) {
    EXPECT_EQ(back.ids()[size_t(r)], t.ids()[size_t(r)]);
    EXPECT_EQ(std::memcmp(back.arena().row(r), t.arena().row(r), kRowBytes), 0);
  }
  RowTable half(kRowBytes, RowFormat::kFloat16);
  EXPECT_TRUE(half.LoadSnapshot(path, 42, 2, 1090).IsCorruption());
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
