// IndexKeeper: the upkeep of one collection's coarse index (index/coarse_index.h)
// over its RowTable. It opens the index file (loaded and caught up to the
// rows, or rebuilt from them), adds appended rows (Sync), trains the index
// once enough live rows are there and fits its default search knobs (Tune),
// takes retired ids out (or counts them as tombstones), saves the file
// stamped with the collection's sequence number, and marks the index stale
// when FAISS fails, after which searches are exhaustive and nothing is saved
// until the next open rebuilds it.
//
// It reads only the row table and the collection's meta (its spec and
// sequence, which the collection advances before it calls in). Not
// synchronised: the collection calls it under its state lock, held
// exclusively for every method that changes something and at least shared
// for the const ones (Collection, query/collection.h); searches read the
// index through SearchState.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"
#include "index/coarse_index.h"
#include "query/row_table.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace query {

class IndexKeeper {
 public:
  // `meta` and `table` outlive the keeper. `index_path` is the index file,
  // trusted only when it carries `binding`; `save_interval` > 0: SaveIfDue
  // saves once that many vectors changed since the last save.
  IndexKeeper(const storage::CollectionMeta* meta, const RowTable* table, std::string index_path,
              uint64_t binding, int64_t save_interval);
  IndexKeeper(const IndexKeeper&) = delete;
  IndexKeeper& operator=(const IndexKeeper&) = delete;

  // A reader's index (call before Open): never saved; Open loads it and
  // catches it up, or rebuilds it, in memory only.
  void SetReadOnly() { read_only_ = true; }

  // After the rows are in the table: loads the index file and catches it up
  // with the rows written after it was saved (then saves it), or rebuilds
  // the index from the rows (and saves it) when the file is missing,
  // unreadable, untrained, from elsewhere or ahead of the records (the
  // latter sets lost_writes()). An index that cannot be rebuilt leaves an
  // empty, stale one: OK, searches are exhaustive. Fails only if even that
  // cannot be built.
  Status Open();

  // Adds rows [first_row, rows()) of the table to a trained index; with
  // `train`, trains an untrained one that has enough live rows (and tunes
  // it) and adds every live row. `batch_rows` and `batch_ids` (if not null):
  // those rows and their ids as the caller packed them (all live), added
  // from there instead of gathered from the arena. A failure marks the
  // index stale and is returned. A no-op on a stale index.
  Status Sync(int64_t first_row, bool train, const uint8_t* batch_rows = nullptr,
              const int64_t* batch_ids = nullptr);
  // Sync of the rows not in the index yet, training an untrained index that
  // has enough live rows.
  Status Train() { return Sync(indexed_rows_, /*train=*/true); }
  // Whether Train would train now: not stale, untrained, enough live rows.
  bool TrainDue() const;
  // After RowTable::Retire of these live ids (unique): takes them out of a
  // trained index, physically where it can and as tombstones otherwise. A
  // failure marks the index stale.
  void Retire(const std::vector<int64_t>& ids);
  // After a reader's catch-up: every live row is in the index, so the rest
  // of its vectors are tombstones (dead ones, or from a file ahead of the
  // view).
  void RecountTombstones();

  // Saves the index file at the meta's sequence: first rebuilds an index
  // that is more than half tombstones, and tunes an index that needs no
  // training (HNSW) once it has enough rows. A stale index is never saved
  // (OK). NotSupported when read-only.
  Status Save();
  // Save, once `save_interval` vectors changed since the last one.
  Status SaveIfDue();
  // From now on searches are exhaustive and the index is never saved; the
  // next open rebuilds it.
  void MarkStale(const std::string& reason);

  const index::CoarseIndex& index() const { return *index_; }
  bool trained() const { return index_->is_trained(); }
  bool stale() const { return index_stale_; }
  int64_t tombstones() const { return tombstones_; }      // dead vectors still in the index
  int64_t indexed_rows() const { return indexed_rows_; }  // rows [0, this) are in the index
  int64_t unsaved_vectors() const { return unsaved_vectors_; }
  uint64_t saved_sequence() const { return index_sequence_; }  // of the file on disk
  // How Open obtained the index: "loaded", "caught-up", "rebuilt", "degraded".
  const std::string& open_mode() const { return open_mode_; }
  // CollectionStats::index_note: why it was rebuilt, not saved, or is stale.
  const std::string& note() const { return index_note_; }
  // Non-empty if Open found that the store lost acknowledged writes (the
  // index file covered a sequence number the records no longer reach).
  const std::string& lost_writes() const { return lost_writes_; }
  // The index fields of CollectionStats (spec.index_factory and index_*,
  // lost_writes).
  void FillStats(CollectionStats* stats) const;

 private:
  Status Rebuild();
  // Save where a failure must not fail the open (note() says).
  void SaveOnOpen();
  // Fits the index's default search knobs to these rows (all live rows).
  Status Tune(const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids);

  const storage::CollectionMeta* const meta_;
  const RowTable* const table_;
  const std::string index_path_;
  const uint64_t binding_;
  const int64_t save_interval_;
  bool read_only_ = false;
  std::unique_ptr<index::CoarseIndex> index_;
  int64_t indexed_rows_ = 0;     // rows [0, indexed_rows_) are in the index
  uint64_t index_sequence_ = 0;  // sequence covered by the index file on disk
  int64_t unsaved_vectors_ = 0;
  int64_t tombstones_ = 0;  // dead vectors still in the index
  bool index_stale_ = false;
  std::string open_mode_;
  std::string index_note_;
  std::string lost_writes_;
};

}  // namespace query
}  // namespace hedgedb
