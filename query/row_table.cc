#include "query/row_table.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "query/arena_file.h"

namespace hedgedb {
namespace query {
namespace {

// Capacity for `size` elements, at least doubling (a reserve per batch of
// exactly what it needs would copy everything every batch).
template <typename T>
void ReserveGrowing(std::vector<T>* v, size_t size) {
  if (v->capacity() < size) v->reserve(std::max(size, 2 * v->capacity()));
}

}  // namespace

RowTable::RowTable(size_t row_bytes, RowFormat row_format)
    : arena_(row_bytes), row_format_(row_format) {}

int64_t RowTable::RowOf(int64_t id) const { return row_of_id_.Find(id); }

void RowTable::Append(int64_t id, bool has_label, int64_t label, const uint8_t* row,
                      uint64_t sequence) {
  const int64_t r = int64_t(ids_.size());
  arena_.Append(row);
  sequences_.push_back(sequence);
  ids_.push_back(id);
  labels_.push_back(label);
  flags_.push_back(uint8_t(kRowLive | (has_label ? kRowHasLabel : 0)));
  row_of_id_.Set(id, r);
  live_rows_.push_back(r);
}

void RowTable::Reserve(int64_t more) {
  const size_t rows = ids_.size() + size_t(more);
  arena_.Reserve(int64_t(rows));
  ReserveGrowing(&ids_, rows);
  ReserveGrowing(&sequences_, rows);
  ReserveGrowing(&labels_, rows);
  ReserveGrowing(&flags_, rows);
  ReserveGrowing(&live_rows_, live_rows_.size() + size_t(more));
  row_of_id_.Reserve(row_of_id_.size() + size_t(more));
}

void RowTable::Retire(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  for (int64_t id : ids) {
    flags_[size_t(row_of_id_.Find(id))] &= uint8_t(~kRowLive);
    row_of_id_.Erase(id);
  }
  live_rows_.erase(std::remove_if(live_rows_.begin(), live_rows_.end(),
                                  [&](int64_t r) { return !(flags_[size_t(r)] & kRowLive); }),
                   live_rows_.end());
}

void RowTable::GatherLive(std::vector<uint8_t>* rows, std::vector<int64_t>* ids,
                          int64_t first_row) const {
  rows->clear();
  ids->clear();
  for (int64_t r = first_row; r < int64_t(ids_.size()); ++r) {
    if (!(flags_[size_t(r)] & kRowLive)) continue;
    rows->insert(rows->end(), arena_.row(r), arena_.row(r + 1));
    ids->push_back(ids_[size_t(r)]);
  }
}

void RowTable::GatherNewer(uint64_t sequence, std::vector<uint8_t>* rows,
                           std::vector<int64_t>* ids) const {
  rows->clear();
  ids->clear();
  for (size_t r = 0; r < ids_.size(); ++r) {
    if (sequences_[r] <= sequence) continue;
    rows->insert(rows->end(), arena_.row(int64_t(r)), arena_.row(int64_t(r) + 1));
    ids->push_back(ids_[r]);
  }
}

Status RowTable::LoadSnapshot(const std::string& path, uint64_t binding, uint64_t sequence,
                              int64_t max_id) {
  ArenaTables tables;
  Status s =
      LoadArenaSnapshot(path, binding, arena_.row_bytes(), row_format_, sequence, &tables, &arena_);
  if (!s.ok()) return s;
  const size_t n = tables.ids.size();
  row_of_id_.Reserve(n);
  for (size_t r = 0; r < n && s.ok(); ++r) {
    if (tables.ids[r] > max_id || !row_of_id_.Insert(tables.ids[r], int64_t(r))) {
      s = Status::Corruption("arena snapshot " + path + " holds item " +
                             std::to_string(tables.ids[r]) + " twice or past the largest id");
    }
  }
  if (!s.ok()) {
    row_of_id_.Clear();
    arena_.Clear();
    return s;
  }
  ids_ = std::move(tables.ids);
  sequences_ = std::move(tables.sequences);
  labels_ = std::move(tables.labels);
  flags_.resize(n);
  live_rows_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    flags_[r] = uint8_t(kRowLive | ((tables.flags[r] & kArenaHasLabel) ? kRowHasLabel : 0));
    live_rows_[r] = int64_t(r);
  }
  return Status::OK();
}

Status RowTable::WriteSnapshot(const std::string& path, uint64_t sequence, uint64_t binding) const {
  // The live rows in row order, as runs of neighbouring rows (no copy).
  const size_t row_bytes = arena_.row_bytes();
  ArenaTables tables;
  std::vector<std::string_view> runs;
  const size_t n = live_rows_.size();
  tables.ids.reserve(n);
  tables.sequences.reserve(n);
  tables.labels.reserve(n);
  tables.flags.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = live_rows_[i];
    tables.ids.push_back(ids_[size_t(r)]);
    tables.sequences.push_back(sequences_[size_t(r)]);
    tables.labels.push_back(labels_[size_t(r)]);
    tables.flags.push_back((flags_[size_t(r)] & kRowHasLabel) ? kArenaHasLabel : 0);
    const char* row = reinterpret_cast<const char*>(arena_.row(r));
    if (i > 0 && live_rows_[i - 1] == r - 1) {
      runs.back() = std::string_view(runs.back().data(), runs.back().size() + row_bytes);
    } else {
      runs.emplace_back(row, row_bytes);
    }
  }
  // Mapped rows are written again only as they were checked: a snapshot
  // changed in place must not come back with valid checksums. Checked
  // before and after the write (the write reads the rows in between).
  HEDGEDB_RETURN_IF_ERROR(arena_.CheckMapped(path));
  HEDGEDB_RETURN_IF_ERROR(
      WriteArenaSnapshot(path, sequence, binding, row_bytes, row_format_, tables, runs));
  return arena_.CheckMapped(path);
}

}  // namespace query
}  // namespace hedgedb
