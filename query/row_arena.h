// RowArena: the collection's item rows (common/row_layout.h), contiguous in
// memory, rows x row_bytes bytes, so that the scorers index them as
// data() + r * row_bytes.
//
// Its first rows may be a private memory map of an arena snapshot file
// (query/arena_file.h): opening a large collection then costs a read of the
// file instead of decoding every record, and the kernel can page those rows
// out and back in, so a collection larger than RAM still searches. Rows
// appended later live in anonymous memory right after the mapped ones, in one
// reserved range of addresses; the file itself is never written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hedgedb/status.h"

namespace hedgedb {
namespace query {

class RowArena {
 public:
  // `min_reserved_bytes`: the smallest range of addresses reserved (growth
  // within it never moves the rows; tests make it small to move them).
  explicit RowArena(size_t row_bytes, size_t min_reserved_bytes = size_t(64) << 20);
  ~RowArena();
  RowArena(const RowArena&) = delete;
  RowArena& operator=(const RowArena&) = delete;

  // rows() x row_bytes() bytes; valid until the next Append or Clear.
  const uint8_t* data() const { return base_; }
  int64_t rows() const { return rows_; }
  size_t row_bytes() const { return row_bytes_; }
  const uint8_t* row(int64_t r) const { return base_ + size_t(r) * row_bytes_; }

  // Appends one row of row_bytes() bytes. Throws std::bad_alloc when the
  // address space or memory runs out, as a std::vector would, unless
  // Reserve made room for it.
  void Append(const uint8_t* row);
  // Makes room for at least `rows` rows, so that appends up to them cannot
  // fail (moves the rows when the reserved range is too small; a mapping is
  // mapped again, not copied). Throws std::bad_alloc.
  void Reserve(int64_t rows);
  // Empties the arena (and unmaps a mapped file).
  void Clear();

  // Replaces the content with `rows` rows read from the open file `fd` at
  // `offset` (a multiple of the page size): mapped privately, read-only, so
  // the page cache holds them. Falls back to reading them into memory where
  // the file cannot be mapped. A file shorter than offset + rows x
  // row_bytes() is an error. `fd` may be closed afterwards.
  Status MapFile(int fd, uint64_t offset, int64_t rows, const std::string& path);
  // Tells the kernel how the mapped rows will be read: in order (a check of
  // every row) or at random (rescoring a query's candidates), so that a
  // page fault reads ahead only in the first case.
  void AdviseSequential(bool sequential);
  // Bytes of rows backed by the file mapping (0: all in anonymous memory).
  size_t mapped_bytes() const { return mapped_bytes_; }
  // The CRC32C that the mapped rows had when they were checked (the file's
  // rows checksum, LoadArenaSnapshot).
  void set_mapped_crc(uint32_t crc) { mapped_crc_ = crc; }
  // OK if the mapped rows still hold what was checked. The mapping is
  // private, but a page the process never wrote shows what the file holds
  // now: a write into the file from outside (a stray process, a bad copy
  // over it) changes the rows served. Corruption naming `path` otherwise.
  // Reads every mapped row (CRC32C, memory speed once the pages are in).
  Status CheckMapped(const std::string& path) const;

 private:
  void Release();

  const size_t row_bytes_;
  const size_t min_reserved_bytes_;
  uint8_t* base_ = nullptr;    // start of the reserved range
  size_t reserved_bytes_ = 0;  // the range's length (a page multiple)
  size_t writable_bytes_ = 0;  // [base_, base_ + writable_bytes_) may be written
  size_t mapped_bytes_ = 0;    // [base_, base_ + mapped_bytes_) comes from the file
  size_t mapped_pages_ = 0;    // page-rounded length of the file mapping
  uint32_t mapped_crc_ = 0;    // set_mapped_crc
  int64_t rows_ = 0;
  int fd_ = -1;  // a duplicate of the mapped file, to map it again
  uint64_t file_offset_ = 0;
};

}  // namespace query
}  // namespace hedgedb
