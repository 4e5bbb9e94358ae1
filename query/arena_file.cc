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

uint64_t RowsOffset(uint64_t rows) {
  const uint64_t end = kArenaHeaderBytes + rows * kTableBytesPerRow;
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

Status WriteArenaSnapshot(const std::string& path, uint64_t sequence, uint64_t binding,
                          size_t row_bytes, const ArenaTables& tables,
                          const std::vector<std::string_view>& row_runs) {
  const uint64_t rows = tables.ids.size();
  std::string table_bytes;
  table_bytes.reserve(rows * kTableBytesPerRow);
  PutArray(&table_bytes, tables.ids);
  PutArray(&table_bytes, tables.sequences);
  PutArray(&table_bytes, tables.labels);
  PutArray(&table_bytes, tables.flags);
  uint32_t rows_crc = 0;
  uint64_t row_total = 0;
  for (std::string_view run : row_runs) {
    rows_crc = Crc32c(run.data(), run.size(), rows_crc);
    row_total += run.size();
  }
  if (row_total != rows * row_bytes || tables.sequences.size() != rows ||
      tables.labels.size() != rows || tables.flags.size() != rows) {
    return Status::Internal("arena snapshot " + path + ": tables and rows disagree");
  }
  const uint64_t rows_offset = RowsOffset(rows);
  std::string header(kMagic, sizeof(kMagic));
  PutFixed(&header, kArenaFileVersion);
  PutFixed(&header, uint32_t(row_bytes));
  PutFixed(&header, sequence);
  PutFixed(&header, binding);
  PutFixed(&header, rows);
  PutFixed(&header, rows_offset);
  PutFixed(&header, Crc32c(table_bytes.data(), table_bytes.size()));
  PutFixed(&header, rows_crc);
  PutFixed(&header, Crc32c(header.data() + sizeof(kMagic), header.size() - sizeof(kMagic)));
  const std::string padding(rows_offset - header.size() - table_bytes.size(), '\0');
  std::vector<std::string_view> parts = {header, table_bytes, padding};
  parts.insert(parts.end(), row_runs.begin(), row_runs.end());
  return WriteFileAtomically(path, parts);
}

Status LoadArenaSnapshot(const std::string& path, uint64_t binding, size_t row_bytes,
                         uint64_t sequence, ArenaTables* tables, RowArena* arena) {
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
  if (file_size < kArenaHeaderBytes || !ReadFullyAt(fd, h, sizeof(h), 0) ||
      std::memcmp(h, kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption(what + " has a bad header");
  }
  const char* p = h + sizeof(kMagic);
  const uint32_t version = GetFixed<uint32_t>(p);
  const uint32_t file_row_bytes = GetFixed<uint32_t>(p + 4);
  const uint64_t file_sequence = GetFixed<uint64_t>(p + 8);
  const uint64_t file_binding = GetFixed<uint64_t>(p + 16);
  const uint64_t rows = GetFixed<uint64_t>(p + 24);
  const uint64_t rows_offset = GetFixed<uint64_t>(p + 32);
  const uint32_t tables_crc = GetFixed<uint32_t>(p + 40);
  const uint32_t rows_crc = GetFixed<uint32_t>(p + 44);
  const uint32_t header_crc = GetFixed<uint32_t>(p + 48);
  if (version != kArenaFileVersion) {
    return Status::Corruption(what + " has format version " + std::to_string(version) +
                              ", this build reads " + std::to_string(kArenaFileVersion));
  }
  if (Crc32c(p, 48) != header_crc) return Status::Corruption(what + " fails its header checksum");
  if (file_binding != binding) {
    return Status::Corruption(what + " belongs to another collection or database");
  }
  if (file_row_bytes != row_bytes) {
    return Status::Corruption(what + " holds rows of " + std::to_string(file_row_bytes) +
                              " bytes, the collection's have " + std::to_string(row_bytes));
  }
  if (file_sequence != sequence) {
    return Status::NotFound(what + " is stale: it covers sequence " +
                            std::to_string(file_sequence) + ", the records " +
                            std::to_string(sequence));
  }
  // Sizes are checked against the file before anything is allocated.
  if (rows > file_size / (kTableBytesPerRow + row_bytes) || rows_offset != RowsOffset(rows) ||
      file_size != rows_offset + rows * row_bytes) {
    return Status::Corruption(what + " is truncated or has trailing bytes (" +
                              std::to_string(file_size) + " bytes for " + std::to_string(rows) +
                              " rows)");
  }
  // The tables and the zeros after them, up to the rows (under 64 KiB more).
  std::string table_bytes(rows_offset - kArenaHeaderBytes, '\0');
  if (!ReadFullyAt(fd, table_bytes.data(), table_bytes.size(), kArenaHeaderBytes)) {
    return Status::IOError("cannot read " + what);
  }
  const size_t tables_size = rows * kTableBytesPerRow;
  if (Crc32c(table_bytes.data(), tables_size) != tables_crc) {
    return Status::Corruption(what + " fails its checksum (tables)");
  }
  if (table_bytes.find_first_not_of('\0', tables_size) != std::string::npos) {
    return Status::Corruption(what + " has bytes where its padding must be zeros");
  }
  const char* t = table_bytes.data();
  t = GetArray(t, rows, &tables->ids);
  t = GetArray(t, rows, &tables->sequences);
  t = GetArray(t, rows, &tables->labels);
  GetArray(t, rows, &tables->flags);
  for (uint64_t r = 0; r < rows; ++r) {
    if (tables->sequences[r] == 0 || tables->sequences[r] > sequence ||
        (tables->flags[r] & ~kArenaHasLabel) != 0) {
      ClearTables(tables);
      return Status::Corruption(what + " holds an invalid entry at row " + std::to_string(r));
    }
  }
  Status s = arena->MapFile(fd, rows_offset, int64_t(rows), path);
  if (s.ok()) {
    // The check reads every row in order; searches then read rows at random.
    arena->AdviseSequential(true);
    if (Crc32c(arena->data(), rows * row_bytes) != rows_crc) {
      s = Status::Corruption(what + " fails its checksum (rows)");
    }
    arena->set_mapped_crc(rows_crc);
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
