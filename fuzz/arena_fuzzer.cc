// The arena snapshot (query/arena_file.cc): the header, the tables and the
// rows' checksum, parsed from memory as LoadArenaSnapshot parses the file.
// A snapshot that passes every check must be exactly what the writer
// produces for its fields and tables (so nothing unchecked is served), and
// the path reader (which maps the rows) must agree with the in-memory parse.
//
// Input: byte 0 is a mode, the file follows.
//   bit 0: fix the three checksums first, so the later checks are reached;
//   bit 1: the file is given without the zeros between the tables and the
//          rows (a valid snapshot is at least 64 KiB, mostly those zeros):
//          insert them where the header's row count puts them;
//   bit 2: expect the file's own binding (else another, which is refused);
//   bit 3: expect a later sequence (a stale snapshot, NotFound);
//   bit 4: also load the file through LoadArenaSnapshot from a scratch file
//          (mapped rows) when its header parses, and compare.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "common/coding.h"
#include "common/crc32c.h"
#include "fuzz/fuzz_util.h"
#include "query/arena_file.h"
#include "query/row_arena.h"

using namespace hedgedb;
using namespace hedgedb::query;

namespace {

constexpr uint64_t kTableBytesPerRow = 8 + 8 + 8 + 1;
// Header field offsets (query/arena_file.h).
constexpr size_t kVersionAt = 8, kRowsAt = 32, kRowsOffsetAt = 40, kTablesCrcAt = 48,
                 kRowsCrcAt = 52;

// The header's length by its version (1: no row format field), the header
// checksum in its last 4 bytes.
size_t HeaderBytesOf(const std::string& file) {
  return GetFixed<uint32_t>(file.data() + kVersionAt) == 1 ? kArenaHeaderBytesV1
                                                           : kArenaHeaderBytes;
}

void PutU32At(std::string* file, size_t at, uint32_t v) {
  std::string le;
  PutFixed<uint32_t>(&le, v);
  file->replace(at, 4, le);
}

void InsertPadding(std::string* file) {
  const uint64_t rows = GetFixed<uint64_t>(file->data() + kRowsAt);
  if (rows > file->size() / kTableBytesPerRow) return;
  const uint64_t tables_end = HeaderBytesOf(*file) + rows * kTableBytesPerRow;
  if (tables_end > file->size()) return;
  const uint64_t rows_offset =
      (tables_end + kArenaRowsAlignment - 1) / kArenaRowsAlignment * kArenaRowsAlignment;
  file->insert(size_t(tables_end), size_t(rows_offset - tables_end), '\0');
}

void FixChecksums(std::string* file) {
  const uint64_t rows = GetFixed<uint64_t>(file->data() + kRowsAt);
  const uint64_t rows_offset = GetFixed<uint64_t>(file->data() + kRowsOffsetAt);
  const size_t header_bytes = HeaderBytesOf(*file);
  if (rows <= (file->size() - header_bytes) / kTableBytesPerRow) {
    PutU32At(file, kTablesCrcAt,
             Crc32c(file->data() + header_bytes, size_t(rows * kTableBytesPerRow)));
  }
  if (rows_offset <= file->size()) {
    PutU32At(file, kRowsCrcAt,
             Crc32c(file->data() + rows_offset, file->size() - size_t(rows_offset)));
  }
  const size_t header_crc_at = header_bytes - 4;
  PutU32At(file, header_crc_at, Crc32c(file->data() + 8, header_crc_at - 8));
}

bool SameTables(const ArenaTables& a, const ArenaTables& b) {
  return a.ids == b.ids && a.sequences == b.sequences && a.labels == b.labels && a.flags == b.flags;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if (file.size() >= kArenaHeaderBytes) {
    if (mode & 2) InsertPadding(&file);
    if (mode & 1) FixChecksums(&file);
  }
  const std::string what = "arena snapshot fuzz.harena";
  ArenaHeader header;
  const std::string_view head(file.data(), std::min(file.size(), kArenaHeaderBytes));
  if (!ParseArenaHeader(head, file.size(), what, &header).ok()) return 0;
  // The sizes agree with the file, so the reads below stay inside it.
  if (header.rows_offset < header.header_bytes + header.rows * kTableBytesPerRow ||
      header.rows_offset % kArenaRowsAlignment != 0 ||
      header.rows_offset + header.rows * header.row_bytes != file.size()) {
    __builtin_trap();
  }
  const uint64_t binding = (mode & 4) ? header.binding : header.binding ^ 42;
  const uint64_t sequence = header.sequence + ((mode & 8) ? 1 : 0);
  const Status fits =
      CheckArenaHeaderFits(header, binding, header.row_bytes, header.row_format, sequence, what);
  if (!(mode & 4)) {
    if (fits.ok() || fits.IsNotFound()) __builtin_trap();  // another binding: refused
  } else if (mode & 8) {
    if (!fits.IsNotFound()) __builtin_trap();  // stale: NotFound, not an error
  } else if (!fits.ok()) {
    __builtin_trap();
  }

  ArenaTables tables;
  Status parsed = ParseArenaTables(
      std::string_view(file.data() + header.header_bytes, header.rows_offset - header.header_bytes),
      header, what, &tables);
  if (!parsed.ok() && !tables.ids.empty()) __builtin_trap();  // left empty on error
  const auto* rows = reinterpret_cast<const uint8_t*>(file.data() + header.rows_offset);
  if (parsed.ok()) parsed = CheckArenaRows(rows, header, what);
  if (parsed.ok()) {
    for (size_t r = 0; r < tables.ids.size(); ++r) {
      if (tables.sequences[r] == 0 || tables.sequences[r] > header.sequence ||
          (tables.flags[r] & ~kArenaHasLabel) != 0) {
        __builtin_trap();
      }
    }
    // Accepted: byte for byte what the writer writes for these fields (the
    // writer writes the current version only).
    std::string written;
    if (header.version == kArenaFileVersion &&
        (!EncodeArenaHead(header.sequence, header.binding, header.row_bytes, header.row_format,
                          tables, Crc32c(rows, header.rows * header.row_bytes), &written)
              .ok() ||
         written.size() != header.rows_offset || file.compare(0, written.size(), written) != 0)) {
      __builtin_trap();
    }
  }

  if (mode & 16) {
    // The path reader: the same verdict, the same tables, the rows mapped.
    const std::string path = fuzz::WriteScratch(
        "fuzz.harena", reinterpret_cast<const uint8_t*>(file.data()), file.size());
    ArenaTables loaded;
    RowArena arena(header.row_bytes, size_t(1) << 16);
    const Status s = LoadArenaSnapshot(path, binding, header.row_bytes, header.row_format, sequence,
                                       &loaded, &arena);
    const bool expect_ok = fits.ok() && parsed.ok();
    if (s.ok() != expect_ok) __builtin_trap();
    if (s.ok()) {
      if (!SameTables(loaded, tables) || uint64_t(arena.rows()) != header.rows ||
          (header.rows * header.row_bytes > 0 &&
           std::memcmp(arena.data(), rows, header.rows * header.row_bytes) != 0) ||
          !arena.CheckMapped(path).ok()) {
        __builtin_trap();
      }
    } else if (!loaded.ids.empty() || arena.rows() != 0) {
      __builtin_trap();
    }
  }
  return 0;
}
