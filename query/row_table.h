// RowTable: a collection's items in memory. The arena of item rows
// (query/row_arena.h, common/row_layout.h) and, per row, its id, label,
// flags and the sequence number of the batch that wrote it, with the map from
// each live id to its row and the live rows in order. Rows are only
// appended: a removed or replaced item's row stays, marked dead, until the
// next open, which reads back the live rows only (from the arena snapshot or
// the records). Not synchronised: the collection's state lock guards it
// (Collection, query/collection.h); searches read it through SearchState.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hedgedb/collection_spec.h"
#include "hedgedb/status.h"
#include "query/id_map.h"
#include "query/row_arena.h"

namespace hedgedb {
namespace query {

// Bits of RowTable::flags().
constexpr uint8_t kRowLive = 1;
constexpr uint8_t kRowHasLabel = 2;

class RowTable {
 public:
  // `row_format`: the collection's (RowFormat), which its arena snapshot
  // records and must match.
  explicit RowTable(size_t row_bytes, RowFormat row_format = RowFormat::kFloat32);
  RowTable(const RowTable&) = delete;
  RowTable& operator=(const RowTable&) = delete;

  const RowArena& arena() const { return arena_; }
  size_t row_bytes() const { return arena_.row_bytes(); }
  // Rows, dead ones included, and live rows.
  int64_t rows() const { return int64_t(ids_.size()); }
  int64_t live_count() const { return int64_t(live_rows_.size()); }
  // Per row.
  const std::vector<int64_t>& ids() const { return ids_; }
  const std::vector<int64_t>& labels() const { return labels_; }
  const std::vector<uint8_t>& flags() const { return flags_; }  // kRowLive | kRowHasLabel
  const std::vector<uint64_t>& sequences() const { return sequences_; }
  bool has_label(int64_t r) const { return (flags_[size_t(r)] & kRowHasLabel) != 0; }
  // The live rows, ascending, and the row of each live id.
  const std::vector<int64_t>& live_rows() const { return live_rows_; }
  const IdMap& row_of_id() const { return row_of_id_; }
  // The row of a live id, or -1.
  int64_t RowOf(int64_t id) const;
  bool Contains(int64_t id) const { return row_of_id_.Contains(id); }

  // Appends a live row (row_bytes() bytes) for an id that is not live.
  // Throws std::bad_alloc unless Reserve made room for it.
  void Append(int64_t id, bool has_label, int64_t label, const uint8_t* row, uint64_t sequence);
  // Makes room for `more` rows, so that as many Appends cannot fail (a batch
  // applied after its commit must not fail halfway). Throws std::bad_alloc.
  void Reserve(int64_t more);
  // Marks the rows of these live ids (unique) dead.
  void Retire(const std::vector<int64_t>& ids);
  // The live rows among [first_row, rows()), copied back to back, and their
  // ids (what an index adds).
  void GatherLive(std::vector<uint8_t>* rows, std::vector<int64_t>* ids, int64_t first_row) const;
  // Every row written by a batch after `sequence` (dead ones included), and
  // its id (what an index file saved at `sequence` lacks).
  void GatherNewer(uint64_t sequence, std::vector<uint8_t>* rows, std::vector<int64_t>* ids) const;

  // Replaces an empty table with the arena snapshot at `path` (its rows
  // mapped) if LoadArenaSnapshot accepts it for `binding` at exactly
  // `sequence`, and its ids are unique and at most `max_id`. Otherwise the
  // error, and the table stays empty (IsMissingArenaSnapshot: no file).
  Status LoadSnapshot(const std::string& path, uint64_t binding, uint64_t sequence, int64_t max_id);
  // Writes the live rows, in row order, as the arena snapshot at `path`.
  // Mapped rows are checked against their checksum before and after.
  Status WriteSnapshot(const std::string& path, uint64_t sequence, uint64_t binding) const;

 private:
  RowArena arena_;
  const RowFormat row_format_;
  std::vector<uint64_t> sequences_;  // of the batch that wrote each row
  std::vector<int64_t> ids_;         // id of each row
  std::vector<int64_t> labels_;      // label of each row
  std::vector<uint8_t> flags_;       // kRowLive | kRowHasLabel
  IdMap row_of_id_;                  // live rows only
  std::vector<int64_t> live_rows_;   // ascending
};

}  // namespace query
}  // namespace hedgedb
