// The arena snapshot of a collection (<db>/index/<collection id>.harena): the
// live item rows of the collection's arena as of one sequence number, so that
// an open maps them instead of decoding every record from the store.
//
// Layout (little-endian; rows in the records' byte order):
//   header, kArenaHeaderBytes (version 2):
//     magic "HEDGEARN", version u32, row bytes u32, sequence u64, binding
//     u64, rows u64, rows offset u64, tables crc u32, rows crc u32,
//     row format u32 (RowFormat: 0 float32, 1 float16, 2 bfloat16),
//     header crc u32 (CRC32C of the header from version to the field before)
//   Version 1 (written before row formats existed) lacks the row format
//   field (a 60-byte header) and holds float32 rows; it is still read.
//   tables, right after the header: ids i64[rows] (in the arena's order), sequences
//     u64[rows], labels i64[rows], flags u8[rows] (bit 1: has a label)
//   zeros up to the rows offset (a multiple of kArenaRowsAlignment)
//   rows: rows x row bytes; the file ends there.
// The snapshot is a cache: the records stay the source of truth. It is used
// only when it carries the collection's binding and exactly the sequence
// number of the records, and both checksums hold; otherwise the arena is
// built from the records and the snapshot written again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hedgedb/collection_spec.h"
#include "hedgedb/status.h"
#include "query/row_arena.h"

namespace hedgedb {
namespace query {

inline constexpr uint32_t kArenaFileVersion = 2;
inline constexpr size_t kArenaHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 4 + 4 + 4 + 4;
// Version 1's header: no row format.
inline constexpr size_t kArenaHeaderBytesV1 = kArenaHeaderBytes - 4;
// The rows start at a multiple of this, so that they can be mapped on any
// page size up to 64 KiB.
inline constexpr uint64_t kArenaRowsAlignment = uint64_t(1) << 16;
inline constexpr uint8_t kArenaHasLabel = 2;

// What the snapshot holds besides the rows, one entry per row.
struct ArenaTables {
  std::vector<int64_t> ids;
  std::vector<uint64_t> sequences;  // of the batch that wrote the row
  std::vector<int64_t> labels;
  std::vector<uint8_t> flags;  // kArenaHasLabel
};

// The header's fields (ParseArenaHeader).
struct ArenaHeader {
  uint32_t version = kArenaFileVersion;
  size_t header_bytes = kArenaHeaderBytes;  // kArenaHeaderBytesV1 for version 1
  RowFormat row_format = RowFormat::kFloat32;
  uint32_t row_bytes = 0;
  uint64_t sequence = 0;
  uint64_t binding = 0;
  uint64_t rows = 0;
  uint64_t rows_offset = 0;  // where the rows start: the file is rows_offset + rows x row_bytes
  uint32_t tables_crc = 0;
  uint32_t rows_crc = 0;
};

// The parts of the reader that work on bytes in memory, in the order
// LoadArenaSnapshot applies them (the fuzz target fuzz/arena_fuzzer.cc
// feeds them arbitrary bytes). `what` names the file in errors.
//
// `bytes`: the first kArenaHeaderBytes (or fewer) bytes of a file of
// `file_size` bytes. Checks the magic, the version (1 or 2), the header
// checksum, the row format and that the sizes agree with file_size, before
// anything is allocated.
Status ParseArenaHeader(std::string_view bytes, uint64_t file_size, const std::string& what,
                        ArenaHeader* header);
// Whether a parsed header may serve a collection with `binding`, `row_bytes`
// and `row_format` whose records are at `sequence` (NotFound if it is
// stale; Corruption naming both formats if they differ).
Status CheckArenaHeaderFits(const ArenaHeader& header, uint64_t binding, size_t row_bytes,
                            RowFormat row_format, uint64_t sequence, const std::string& what);
// `bytes`: the file from the end of the header up to the rows
// (header.rows_offset - header.header_bytes bytes): the tables, their
// checksum, zeros after them, and entries that a writer at header.sequence
// can have written. On error *tables is left empty.
Status ParseArenaTables(std::string_view bytes, const ArenaHeader& header, const std::string& what,
                        ArenaTables* tables);
// The rows (header.rows x header.row_bytes bytes) against their checksum.
Status CheckArenaRows(const uint8_t* rows, const ArenaHeader& header, const std::string& what);
// The file up to its rows, as WriteArenaSnapshot writes it (header, tables,
// zeros), for rows whose CRC32C is `rows_crc`. Tables of different lengths
// are an Internal error.
Status EncodeArenaHead(uint64_t sequence, uint64_t binding, size_t row_bytes, RowFormat row_format,
                       const ArenaTables& tables, uint32_t rows_crc, std::string* head);

// <db_path>/index/<collection id>.harena
std::string ArenaFilePath(const std::string& db_path, uint32_t collection_id);

// Writes the snapshot atomically (common/file_util.h). `row_runs` are the
// rows, in the order of `tables`, as runs of whole rows (tables.ids.size() x
// row_bytes bytes in all).
Status WriteArenaSnapshot(const std::string& path, uint64_t sequence, uint64_t binding,
                          size_t row_bytes, RowFormat row_format, const ArenaTables& tables,
                          const std::vector<std::string_view>& row_runs);

// Loads the snapshot at `path` into *tables and *arena (its rows mapped) if
// it is whole, has `binding`, `row_bytes` and `row_format`, and covers
// exactly `sequence`.
// NotFound if there is none; otherwise an error naming the path and what is
// wrong ("fails its checksum", "covers sequence 5, the records 7", ...), and
// *tables and *arena are left empty.
Status LoadArenaSnapshot(const std::string& path, uint64_t binding, size_t row_bytes,
                         RowFormat row_format, uint64_t sequence, ArenaTables* tables,
                         RowArena* arena);
// True if LoadArenaSnapshot returned `loaded` because there is no snapshot
// at all (rather than one it refused).
bool IsMissingArenaSnapshot(const Status& loaded);

}  // namespace query
}  // namespace hedgedb
