#include "query/arena_file.h"

#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/file_util.h"

namespace hedgedb {
namespace query {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'D', 'G', 'E', 'A', 'R', 'N'};
// The start of LoadArenaSnapshot's message when there is no file.
constexpr char kNoArenaSnapshot[] = "no arena snapshot ";
// Bytes of the tables per row: id, sequence, label, flags.
constexpr uint64_t kTableBytesPerRow = 8 + 8 + 8 + 1;

uint64_t RowsOffset(uint64_t rows, size_t header_bytes) {
  const uint64_t end = header_bytes + rows * kTableBytesPerRow;
  return (end + kArenaRowsAlignment - 1) / kArenaRowsAlignment * kArenaRowsAlignment;
}

template <typename T>
void PutArray(std::string* out, const std::vector<T>& values) {
  if (values.empty()) return;  // data() may be null
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  out->append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
#else
  for (T v : values) PutFixed(out, v);
#endif
}

template <typename T>
const char* GetArray(const char* p, size_t n, std::vector<T>* values) {
  values->resize(n);
  if (n == 0) return p;  // data() may be null
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(values->data(), p, n * sizeof(T));
#else
  for (size_t i = 0; i < n; ++i) (*values)[i] = GetFixed<T>(p + i * sizeof(T));
#endif
  return p + n * sizeof(T);
}

void ClearTables(ArenaTables* t) {
  t->ids.clear();
  t->sequences.clear();
  t->labels.clear();
  t->flags.clear();
}

}  // namespace

bool IsMissingArenaSnapshot(const Status& loaded) {
  return loaded.IsNotFound() && loaded.message().rfind(kNoArenaSnapshot, 0) == 0;
}

std::string ArenaFilePath(const std::string& db_path, uint32_t collection_id) {
  return db_path + "/index/" + std::to_string(collection_id) + ".harena";
}

Status EncodeArenaHead(uint64_t sequence, uint64_t binding, size_t row_bytes, RowFormat row_format,
                       const ArenaTables& tables, uint32_t rows_crc, std::string* head) {
  const uint64_t rows = tables.ids.size();
  if (tables.sequences.size() != rows || tables.labels.size() != rows ||
      tables.flags.size() != rows) {
    return Status::Internal("arena snapshot tables of different lengths");
  }
  std::string table_bytes;
  table_bytes.reserve(rows * kTableBytesPerRow);
  PutArray(&table_bytes, tables.ids);
  PutArray(&table_bytes, tables.sequences);
  PutArray(&table_bytes, tables.labels);
  PutArray(&table_bytes, tables.flags);
  const uint64_t rows_offset = RowsOffset(rows, kArenaHeaderBytes);
  std::string& out = *head;
  out.assign(kMagic, sizeof(kMagic));
  PutFixed(&out, kArenaFileVersion);
  PutFixed(&out, uint32_t(row_bytes));
  PutFixed(&out, sequence);
  PutFixed(&out, binding);
  PutFixed(&out, rows);
  PutFixed(&out, rows_offset);
  PutFixed(&out, Crc32c(table_bytes.data(), table_bytes.size()));
  PutFixed(&out, rows_crc);
  PutFixed(&out, uint32_t(row_format));
  PutFixed(&out, Crc32c(out.data() + sizeof(kMagic), out.size() - sizeof(kMagic)));
  out += table_bytes;
  out.resize(rows_offset, '\0');
  return Status::OK();
}

Status WriteArenaSnapshot(const std::string& path, uint64_t sequence, uint64_t binding,
                          size_t row_bytes, RowFormat row_format, const ArenaTables& tables,
                          const std::vector<std::string_view>& row_runs) {
  uint32_t rows_crc = 0;
  uint64_t row_total = 0;
  for (std::string_view run : row_runs) {
    rows_crc = Crc32c(run.data(), run.size(), rows_crc);
    row_total += run.size();
  }
  if (row_total != tables.ids.size() * row_bytes) {
    return Status::Internal("arena snapshot " + path + ": tables and rows disagree");
  }
  std::string head;
  const Status encoded =
      EncodeArenaHead(sequence, binding, row_bytes, row_format, tables, rows_crc, &head);
  if (!encoded.ok()) return Status::Internal("arena snapshot " + path + ": " + encoded.message());
  std::vector<std::string_view> parts = {head};
  parts.insert(parts.end(), row_runs.begin(), row_runs.end());
  return WriteFileAtomically(path, parts);
}

Status ParseArenaHeader(std::string_view bytes, uint64_t file_size, const std::string& what,
                        ArenaHeader* header) {
  if (file_size < kArenaHeaderBytesV1 || bytes.size() < kArenaHeaderBytesV1 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption(what + " has a bad header");
  }
  const char* p = bytes.data() + sizeof(kMagic);
  const uint32_t version = GetFixed<uint32_t>(p);
  if (version != 1 && version != kArenaFileVersion) {
    return Status::Corruption(what + " has format version " + std::to_string(version) +
                              ", this build reads 1 and " + std::to_string(kArenaFileVersion));
  }
  ArenaHeader h;
  h.version = version;
  h.header_bytes = version == 1 ? kArenaHeaderBytesV1 : kArenaHeaderBytes;
  if (file_size < h.header_bytes || bytes.size() < h.header_bytes) {
    return Status::Corruption(what + " has a bad header");
  }
  // The checksum covers the header from the version on, up to itself.
  const size_t covered = h.header_bytes - sizeof(kMagic) - 4;
  if (Crc32c(p, covered) != GetFixed<uint32_t>(p + covered)) {
    return Status::Corruption(what + " fails its header checksum");
  }
  if (version >= 2) {
    const uint32_t format = GetFixed<uint32_t>(p + 48);
    if (format > uint32_t(RowFormat::kBfloat16)) {
      return Status::Corruption(what + " has an unknown row format " + std::to_string(format));
    }
    h.row_format = RowFormat(format);
  }
  h.row_bytes = GetFixed<uint32_t>(p + 4);
  h.sequence = GetFixed<uint64_t>(p + 8);
  h.binding = GetFixed<uint64_t>(p + 16);
  h.rows = GetFixed<uint64_t>(p + 24);
  h.rows_offset = GetFixed<uint64_t>(p + 32);
  h.tables_crc = GetFixed<uint32_t>(p + 40);
  h.rows_crc = GetFixed<uint32_t>(p + 44);
  // Sizes are checked against the file before anything is allocated; the
  // first bound keeps the products below from overflowing.
  if (h.rows > file_size / (kTableBytesPerRow + h.row_bytes) ||
      h.rows_offset != RowsOffset(h.rows, h.header_bytes) ||
      file_size != h.rows_offset + h.rows * h.row_bytes) {
    return Status::Corruption(what + " is truncated or has trailing bytes (" +
                              std::to_string(file_size) + " bytes for " + std::to_string(h.rows) +
                              " rows)");
  }
  *header = h;
  return Status::OK();
}

Status CheckArenaHeaderFits(const ArenaHeader& header, uint64_t binding, size_t row_bytes,
                            RowFormat row_format, uint64_t sequence, const std::string& what) {
  if (header.binding != binding) {
    return Status::Corruption(what + " belongs to another collection or database");
  }
  // float16 and bfloat16 rows have the same length: the format tells them
  // apart, and read as the other they would be wrong numbers.
  if (header.row_format != row_format) {
    return Status::Corruption(what + " holds " + RowFormatName(header.row_format) +
                              " rows, the collection's row format is " + RowFormatName(row_format));
  }
  if (header.row_bytes != row_bytes) {
    return Status::Corruption(what + " holds rows of " + std::to_string(header.row_bytes) +
                              " bytes, the collection's have " + std::to_string(row_bytes));
  }
  if (header.sequence != sequence) {
    return Status::NotFound(what + " is stale: it covers sequence " +
                            std::to_string(header.sequence) + ", the records " +
                            std::to_string(sequence));
  }
  return Status::OK();
}

Status ParseArenaTables(std::string_view bytes, const ArenaHeader& header, const std::string& what,
                        ArenaTables* tables) {
  ClearTables(tables);
  const uint64_t rows = header.rows;
  const uint64_t tables_size = rows * kTableBytesPerRow;
  if (bytes.size() != header.rows_offset - header.header_bytes || bytes.size() < tables_size) {
    return Status::Corruption(what + " has tables of the wrong size");
  }
  if (Crc32c(bytes.data(), tables_size) != header.tables_crc) {
    return Status::Corruption(what + " fails its checksum (tables)");
  }
  if (bytes.find_first_not_of('\0', tables_size) != std::string_view::npos) {
    return Status::Corruption(what + " has bytes where its padding must be zeros");
  }
  const char* t = bytes.data();
  t = GetArray(t, rows, &tables->ids);
  t = GetArray(t, rows, &tables->sequences);
  t = GetArray(t, rows, &tables->labels);
  GetArray(t, rows, &tables->flags);
  for (uint64_t r = 0; r < rows; ++r) {
    if (tables->sequences[r] == 0 || tables->sequences[r] > header.sequence ||
        (tables->flags[r] & ~kArenaHasLabel) != 0) {
      ClearTables(tables);
      return Status::Corruption(what + " holds an invalid entry at row " + std::to_string(r));
    }
  }
  return Status::OK();
}

Status CheckArenaRows(const uint8_t* rows, const ArenaHeader& header, const std::string& what) {
  if (Crc32c(rows, header.rows * header.row_bytes) != header.rows_crc) {
    return Status::Corruption(what + " fails its checksum (rows)");
  }
  return Status::OK();
}

Status LoadArenaSnapshot(const std::string& path, uint64_t binding, size_t row_bytes,
                         RowFormat row_format, uint64_t sequence, ArenaTables* tables,
                         RowArena* arena) {
  ClearTables(tables);
  arena->Clear();
  int fd = -1;
  uint64_t file_size = 0;
  const Status opened = OpenRegularFile(path, &fd, &file_size);
  if (opened.IsNotFound()) return Status::NotFound(kNoArenaSnapshot + path);
  HEDGEDB_RETURN_IF_ERROR(opened);
  FdCloser closer(fd);
  const std::string what = "arena snapshot " + path;
  char h[kArenaHeaderBytes];
  size_t got = file_size < kArenaHeaderBytes ? 0 : sizeof(h);
  if (got > 0 && !ReadFullyAt(fd, h, got, 0)) got = 0;  // reported as a bad header
  ArenaHeader header;
  HEDGEDB_RETURN_IF_ERROR(ParseArenaHeader(std::string_view(h, got), file_size, what, &header));
  HEDGEDB_RETURN_IF_ERROR(
      CheckArenaHeaderFits(header, binding, row_bytes, row_format, sequence, what));
  // The tables and the zeros after them, up to the rows (under 64 KiB more).
  std::string table_bytes(header.rows_offset - header.header_bytes, '\0');
  if (!ReadFullyAt(fd, table_bytes.data(), table_bytes.size(), header.header_bytes)) {
    return Status::IOError("cannot read " + what);
  }
  HEDGEDB_RETURN_IF_ERROR(ParseArenaTables(table_bytes, header, what, tables));
  Status s = arena->MapFile(fd, header.rows_offset, int64_t(header.rows), path);
  if (s.ok()) {
    // The check reads every row in order; searches then read rows at random.
    arena->AdviseSequential(true);
    s = CheckArenaRows(arena->data(), header, what);
    arena->set_mapped_crc(header.rows_crc);
    arena->AdviseSequential(false);
  }
  if (!s.ok()) {
    ClearTables(tables);
    arena->Clear();
  }
  return s;
}

}  // namespace query
}  // namespace hedgedb
