// Collection: the one orchestration layer that wires the record store, the
// coarse index and the exact scorers of one collection together.
//
// In memory it keeps its items in a RowTable (query/row_table.h): an arena
// of item rows (common/row_layout.h), ids, labels and the id map, so that
// stage-2 rescoring never touches RocksDB: on open it maps the arena
// snapshot file (query/arena_file.h) when that covers exactly the records,
// and reads the records otherwise (then writes the snapshot).
// Locking: writes are serialised by write_mutex_ and commit to RocksDB before
// they touch memory; in-memory state (arena, id map, index) is guarded by
// state_mutex_, shared by searches and exclusive for the short apply step.
// A search itself is a Searcher (query/searcher.h) over a const view of that
// state, run under the shared lock; the coarse index and its upkeep (sync,
// train, tune, save, mark stale) are an IndexKeeper (query/index_keeper.h)
// over the row table; the collection keeps the writes, the locks and the
// catch-up, and calls the keeper under its state lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "calibration/calibration_map.h"
#include "common/row_layout.h"
#include "common/rw_mutex.h"
#include "hedgedb/calibration.h"
#include "hedgedb/status.h"
#include "hedgedb/types.h"
#include "query/index_keeper.h"
#include "query/item_filter.h"
#include "query/row_table.h"
#include "query/scorer.h"
#include "query/searcher.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace query {

// Checks a spec for creation (name, dimensions, kind parameters, a, samples,
// index factory). `exercise_index`: also build the index and train, add and
// search a sample (CoarseIndex::Validate), which create does once; an open
// skips it (each open of a collection paid a FAISS training), as opening
// checks the factory string's grammar only (what FAISS could abort on) and
// turns what FAISS throws later into errors.
Status ValidateSpec(const CollectionSpec& spec, bool exercise_index = true);

class Collection {
 public:
  // `store` outlives the collection. `index_path` is its index file and
  // `arena_path` its arena snapshot, which are only trusted when they carry
  // `index_binding` (an identity of this collection in this database).
  // `upkeep`: when a write makes the index's check due (IndexKeeper).
  Collection(storage::RecordStore* store, const storage::CollectionMeta& meta,
             std::string index_path, std::string arena_path, uint64_t index_binding,
             int64_t index_save_interval, const UpkeepPolicy& upkeep = UpkeepPolicy());
  // Stops the upkeep thread: a retrain in progress is abandoned at its next
  // step (the index file on disk stays the one last saved) and joined.
  ~Collection();

  // Maps the arena snapshot or loads the records (and saves the snapshot),
  // then loads the index file and catches it up, or rebuilds it (and saves
  // it) when it is missing, unreadable or stale. An index that cannot be
  // rebuilt leaves the collection open with exhaustive searches (Stats says
  // why).
  Status Open();

  // Commits, applies to memory and adds to a trained index; training waits
  // for the next search or SaveIndex, so the call returns once the batch is
  // durable.
  Status Ingest(const IngestBatch& batch, std::vector<int64_t>* ids, IngestResult* result);
  Status Get(const int64_t* ids, size_t n, std::vector<Record>* records);
  void ListIds(std::vector<int64_t>* ids) const;
  Status Remove(const int64_t* ids, size_t n, int64_t* removed);
  Status Search(const EmbeddingView& queries, const SearchOptions& options,
                std::vector<SearchResult>* results);
  Status Stats(CollectionStats* stats);
  // DB::Calibrate, DB::ImportCalibration, DB::RemoveCalibration
  // (query/calibrate.cc).
  Status Calibrate(const CalibrateOptions& options, CalibrationReport* report);
  Status ImportCalibration(const std::string& map_bytes, double base_rate);
  Status RemoveCalibration(ScoreType score);
  // Trains the index if it has enough items, then saves the index file and
  // the arena snapshot where they are behind the records (never a stale
  // index).
  Status SaveIndex();
  // The collection is being dropped: from now on writes fail with NotFound
  // (a write in flight would otherwise store the dropped descriptor again).
  void MarkDropped();
  // A reader's collection (Options::read_only; call before Open): its index
  // file is never written; Open loads it and catches it up, or rebuilds the
  // index, in memory only.
  void SetReadOnly() {
    read_only_ = true;
    keeper_.SetReadOnly();
  }
  // Reader: applies what the store now holds past meta().sequence (`latest`
  // is the collection's descriptor there): new items join the arena and the
  // index, removed ones leave, calibrations are reloaded. In memory only.
  Status CatchUp(const storage::CollectionMeta& latest);

  // Tests only: called with the name of each step of RunUpkeep as it is
  // reached ("measured", then for a retrain "retraining", "trained",
  // "caught-up", "saving" (if it gets there) and "adopted" or "abandoned"),
  // on the thread that runs it, with no lock held except at "saving"
  // (write_mutex_, and the state lock shared), so that a test can hold a
  // retrain between steps. Empty: none.
  static void SetUpkeepHookForTest(std::function<void(const char*)> hook);

  // A copy: calibrate may refit the match parameters meanwhile.
  CollectionSpec spec() const {
    std::shared_lock<RwMutex> lock(state_mutex_);
    return meta_.spec;
  }
  const storage::CollectionMeta& meta() const { return meta_; }
  // How the index was obtained on Open: "loaded", "caught-up", "rebuilt".
  const std::string& open_mode() const { return keeper_.open_mode(); }
  // Non-empty if Open found that the store lost acknowledged writes (the
  // index file covered a sequence number the store no longer reaches).
  const std::string& lost_writes() const { return keeper_.lost_writes(); }

 private:
  // Builds payload_index_ if a search needs it and it is not built yet.
  Status EnsurePayloadIndex();
  // What a Searcher reads (state lock held, shared, while it runs).
  SearchState SearchStateLocked() const;
  // Loads the stored calibration maps (Open); a damaged one is skipped and
  // noted.
  Status LoadCalibrationsLocked();
  Status ValidateItems(const IngestBatch& batch) const;
  Status ValidateQueries(const EmbeddingView& queries) const;
  // Packs row i of a view into the arena layout (floats or code bytes).
  void PackItemRow(const EmbeddingView& v, int64_t i, uint8_t* row) const;
  void PackQueryRow(const EmbeddingView& v, int64_t i, float* row) const;
  // Open: the rows from the arena snapshot if it covers the records exactly
  // (*from_snapshot), else from the records; arena_note_ says why a snapshot
  // that exists was not used.
  Status LoadRowsLocked(bool* from_snapshot);
  // Writes the arena snapshot of the live rows (write_mutex_ held, the state
  // lock at least shared); then NoteArenaWritten under the exclusive lock. A
  // failure costs only the next open's read of the records, so it is noted
  // (CollectionStats::arena_note), never returned to a caller.
  Status WriteArenaLocked() const;
  void NoteArenaWritten(const Status& written);
  // Marks the rows of these live ids (unique) dead and removes them from the
  // index (IndexKeeper::Retire), after a commit that deleted or replaced
  // them or a catch-up that found them gone.
  void RetireLocked(const std::vector<int64_t>& ids);
  // Trains the index if a search would otherwise scan too many items.
  Status TrainIfDue();
  // After a write (no lock held): if the index's check is due, runs it now
  // (UpkeepPolicy::run_inline) or wakes the upkeep thread.
  void UpkeepIfDue();
  // The check and, when it says so, the retrain: measures under write_mutex_
  // and the shared state lock (writes wait, searches go on); trains the new
  // index under no lock (searches and writes go on against the old one);
  // catches it up with the writes made meanwhile, saves its file (write_mutex_
  // and the shared lock again) and swaps it in under the exclusive lock. Gives up (the old index
  // stays) when the collection closes, is dropped or a step fails.
  void RunUpkeep();
  void UpkeepLoop();
  bool UpkeepStopping() const { return upkeep_stop_.load(std::memory_order_relaxed); }
  // A replay of a committed batch token, or NotFound.
  Status FindReplay(const IngestBatch& batch, uint32_t content_crc, std::vector<int64_t>* ids,
                    IngestResult* result);
  // Commits a write (write_mutex_ held; the state lock not held, so that
  // searches go on meanwhile), as RecordStore::Commit.
  Status CommitWrite(const storage::CollectionMeta& next,
                     const std::vector<storage::RecordWrite>& puts,
                     const std::vector<int64_t>& deletes, const storage::BatchToken* token);
  // After a committed write is applied to memory (state lock held
  // exclusively): the applied snapshot is dropped.
  void WriteAppliedLocked();
  // The store as memory shows it (state lock held, shared): the cached
  // applied snapshot, or one taken now. false while a write is between its
  // commit and its apply and no snapshot was taken before its commit: then
  // release the lock, WaitForWrite and try again.
  bool AppliedSnapshotLocked(std::shared_ptr<const rocksdb::Snapshot>* snapshot);
  void WaitForWrite();

  storage::RecordStore* const store_;
  storage::CollectionMeta meta_;
  const std::string arena_path_;
  const uint64_t index_binding_;
  const size_t row_bytes_;

  std::mutex write_mutex_;
  mutable RwMutex state_mutex_;
  RowTable table_;               // the items in memory: rows, ids, labels, id map
  IndexKeeper keeper_;           // the coarse index over table_ (guarded by state_mutex_)
  uint64_t arena_sequence_ = 0;  // sequence covered by the arena snapshot on disk (0: none)
  std::string arena_source_;     // CollectionStats::arena_source
  std::string arena_note_;       // CollectionStats::arena_note
  bool read_only_ = false;       // SetReadOnly
  bool dropped_ = false;         // guarded by write_mutex_
  // Calibration maps by resolved score type (guarded by state_mutex_).
  std::map<ScoreType, calibration::CalibrationMap> calibrations_;
  std::string calibration_note_;
  // The record store as of the last write applied to memory, so that Get
  // and Search read payloads that belong to the vectors they return. Taken
  // only while reads need it (AppliedSnapshotLocked; before a write's commit
  // if reads needed it during the previous write) and dropped when a write
  // is applied: RocksDB rewrites its bottommost table files once a released
  // snapshot was older than them, so a snapshot per batch made ingest write
  // every record twice more (bench/RESULTS.md, Ingest). Null for a reader,
  // whose view changes only in CatchUp. These four are guarded by
  // snapshot_mutex_.
  std::mutex snapshot_mutex_;
  std::shared_ptr<const rocksdb::Snapshot> applied_snapshot_;
  bool committing_ = false;       // a write is between its commit and its apply
  bool snapshot_wanted_ = false;  // take applied_snapshot_ before the next commit
  bool snapshot_used_ = false;    // a read needed applied_snapshot_ since the last apply
  // Upkeep (RunUpkeep): the thread, started at the first check due, and its
  // wake-up; upkeep_mutex_ guards upkeep_wanted_ and upkeep_thread_.
  const UpkeepPolicy upkeep_;
  std::mutex upkeep_mutex_;
  std::condition_variable upkeep_cv_;
  bool upkeep_wanted_ = false;
  std::atomic<bool> upkeep_stop_{false};
  std::thread upkeep_thread_;
  std::mutex upkeep_run_mutex_;  // one RunUpkeep at a time
  // The payloads' top-level fields, built at the first search that filters
  // on them, then kept current by Ingest (guarded by state_mutex_).
  std::unique_ptr<PayloadFieldIndex> payload_index_;
};

}  // namespace query
}  // namespace hedgedb
