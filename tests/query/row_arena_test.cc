// RowArena: rows mapped from a file and rows appended after them read back
// as one contiguous array, also after the range of addresses moves; the
// file itself never changes.
#include "query/row_arena.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace hedgedb {
namespace query {
namespace {

using testing_util::ReadBytes;
using testing_util::WriteBytes;

// Row r of `row_bytes` bytes: every byte a function of (r, byte).
std::vector<uint8_t> RowOf(int64_t r, size_t row_bytes) {
  std::vector<uint8_t> row(row_bytes);
  for (size_t b = 0; b < row_bytes; ++b) row[b] = uint8_t((r * 131 + int64_t(b) * 7 + 3) & 0xFF);
  return row;
}

void ExpectRows(const RowArena& arena, int64_t n, size_t row_bytes) {
  ASSERT_EQ(arena.rows(), n);
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<uint8_t> want = RowOf(r, row_bytes);
    ASSERT_EQ(std::memcmp(arena.data() + size_t(r) * row_bytes, want.data(), row_bytes), 0)
        << "row " << r;
    ASSERT_EQ(arena.row(r), arena.data() + size_t(r) * row_bytes);
  }
}

class RowArenaTest : public testing_util::TempDirTest {
 protected:
  // A file of `header` junk bytes, then `rows` rows.
  std::string WriteRowsFile(size_t header, int64_t rows, size_t row_bytes) {
    std::string bytes(header, 'h');
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<uint8_t> row = RowOf(r, row_bytes);
      bytes.append(reinterpret_cast<const char*>(row.data()), row.size());
    }
    const std::string path = Path("rows");
    WriteBytes(path, bytes);
    return path;
  }
};

TEST_F(RowArenaTest, AppendsGrowAndMoveTheRowsIntact) {
  // An odd row size, and a small reservation so that the rows move often.
  const size_t row_bytes = 1000;
  RowArena arena(row_bytes, 4096);
  for (int64_t r = 0; r < 5000; ++r) arena.Append(RowOf(r, row_bytes).data());
  ExpectRows(arena, 5000, row_bytes);
  EXPECT_EQ(arena.mapped_bytes(), 0u);
  arena.Clear();
  EXPECT_EQ(arena.rows(), 0);
}

TEST_F(RowArenaTest, MappedRowsThenAppendedRowsReadAsOneArray) {
  const size_t row_bytes = 1000;  // the file's rows end inside a page
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const int64_t file_rows = 777;
  const std::string path = WriteRowsFile(page, file_rows, row_bytes);
  const std::string before = ReadBytes(path);
  RowArena arena(row_bytes, page);  // reserved: just above the mapped rows
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(arena.MapFile(fd, page, file_rows, path).ok());
    ::close(fd);  // the arena keeps what it needs
  }
  EXPECT_EQ(arena.mapped_bytes(), size_t(file_rows) * row_bytes);
  ExpectRows(arena, file_rows, row_bytes);
  // The first appended rows share the file's last page (copy on write), the
  // next ones move the range several times (the file is mapped again).
  for (int64_t r = file_rows; r < 6000; ++r) arena.Append(RowOf(r, row_bytes).data());
  ExpectRows(arena, 6000, row_bytes);
  EXPECT_EQ(arena.mapped_bytes(), size_t(file_rows) * row_bytes);
  EXPECT_EQ(ReadBytes(path), before) << "the arena wrote to its file";
  arena.Clear();
  EXPECT_EQ(arena.mapped_bytes(), 0u);
  EXPECT_EQ(ReadBytes(path), before);
}

TEST_F(RowArenaTest, UnalignedOffsetIsReadInsteadOfMapped) {
  const size_t row_bytes = 24;
  const std::string path = WriteRowsFile(100, 50, row_bytes);
  RowArena arena(row_bytes);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(arena.MapFile(fd, 100, 50, path).ok());
  ::close(fd);
  EXPECT_EQ(arena.mapped_bytes(), 0u);
  ExpectRows(arena, 50, row_bytes);
  arena.Append(RowOf(50, row_bytes).data());
  ExpectRows(arena, 51, row_bytes);
}

TEST_F(RowArenaTest, ShortFileIsAnError) {
  const size_t row_bytes = 24;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  // Read (unaligned offset) and mapped (page offset) alike: 20 rows asked,
  // 10 there. A mapping past the end would fault at first touch instead.
  for (size_t offset : {size_t(100), page}) {
    const std::string path = WriteRowsFile(offset, 10, row_bytes);
    RowArena arena(row_bytes);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const Status s = arena.MapFile(fd, offset, 20, path);
    ::close(fd);
    EXPECT_FALSE(s.ok()) << offset;
    EXPECT_NE(s.ToString().find(path), std::string::npos) << s.ToString();
    EXPECT_EQ(arena.rows(), 0);
  }
}

}  // namespace
}  // namespace query
}  // namespace hedgedb
