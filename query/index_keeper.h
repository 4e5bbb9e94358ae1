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
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hedgedb/status.h"
#include "hedgedb/types.h"
#include "index/coarse_index.h"
#include "index/index_file.h"
#include "query/row_table.h"
#include "storage/record_store.h"

namespace hedgedb {
namespace query {

// How a collection keeps a trained IVF index fit for its items as they change
// (Options::index_recheck_fraction, index_retrain_recall,
// index_retrain_imbalance).
struct UpkeepPolicy {
  // Check once inserted + removed vectors since the last check (or training)
  // reach this fraction of the live items; 0: never.
  double recheck_fraction = 0.1;
  // A measured stage-1 (coarse) recall below this (or below the coarse
  // recall the fit measured at training less 0.02, if that is lower) is
  // repaired: the index is retrained, and meanwhile, if it is under 0.95 (or
  // the fit's coarse recall, if lower), nprobe is raised (up to twice the
  // fitted one) where that reaches it.
  double retrain_recall = 0.97;
  // Lists more than this many times as unbalanced (CoarseIndex::
  // ListImbalance) as right after the last training are retrained too,
  // whatever the recall; 0: never for imbalance.
  double retrain_imbalance = 1.5;
  // Run a due check (and retrain) inside the write that made it due.
  bool run_inline = false;
  // OpenMP threads of the upkeep thread (Options::threads; 0: the default).
  int threads = 0;
};

// What one check of the index measured and decided (IndexKeeper::Measure).
struct UpkeepCheck {
  int64_t changes = 0;   // vectors added or removed since the last check
  int64_t live = 0;      // live rows measured
  int knob = 0;          // the default nprobe at the check
  double recall = 0;     // its measured stage-1 recall
  double threshold = 0;  // repaired below this (IndexKeeper::RepairBelow)
  int retuned_knob = 0;  // > 0: nprobe for meanwhile (reaches the target)
  double retuned_recall = 0;
  int best_knob = 0;  // the widest nprobe tried, and its recall
  double best_recall = 0;
  // The lists' imbalance at the check, the baseline (right after the last
  // training) and the policy's limit (retrain_imbalance x baseline; NaN:
  // none); unbalanced: above the limit.
  double imbalance = std::numeric_limits<double>::quiet_NaN();
  double imbalance_baseline = std::numeric_limits<double>::quiet_NaN();
  double imbalance_limit = std::numeric_limits<double>::quiet_NaN();
  bool unbalanced = false;
  bool low_recall = false;  // below the threshold
  // A retrain's new index's imbalance over the rows it was trained on,
  // before the writes made during the training join it (the collection sets
  // it after BuildIndex): the next baseline. NaN: use the adopted index's.
  double trained_imbalance = std::numeric_limits<double>::quiet_NaN();
  bool retrain = false;   // low_recall or unbalanced: train a new index
  uint64_t sequence = 0;  // the collection's sequence at the check
};

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
  // A check or re-tune changed the upkeep state since the file was saved: a
  // check can follow the save of the same write (the save interval reached
  // first), so the sequence alone does not say the file is behind.
  bool upkeep_unsaved() const { return upkeep_unsaved_; }
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

  // Upkeep under churn, in phases that the collection runs under the locks
  // each names (Collection::RunUpkeep). Applies to a trained IVF index over
  // vectors (physical removal, tunable nprobe) of a writer.
  // Vectors added or removed since the index was trained or last checked.
  int64_t changes_since_check() const { return upkeep_.changes_since_check; }
  // Whether a check is due under `policy` (state lock shared).
  bool CheckDue(const UpkeepPolicy& policy) const;
  // Measures the stage-1 recall of the current index for these rows (all
  // live rows, as GatherLive packs them) as the tuning does, but with 100 of
  // the newest rows as queries (the newest recheck_fraction of them, at
  // least 1,000), at the current
  // nprobe and on a doubling ladder up to twice the nprobe fitted at the
  // last training, and the lists' imbalance, and decides: nothing (recall
  // >= RepairBelow and the imbalance within the policy's limit), or a
  // retrain, with a re-tune meanwhile if the recall is low and a rung
  // reaches the tuning target.
  // State lock shared: searches go on.
  Status Measure(const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids,
                 const UpkeepPolicy& policy, UpkeepCheck* check) const;
  // State lock exclusive: a check whose measurement failed (`why`); the
  // estimate stays, the count restarts.
  void NoteCheckFailed(const UpkeepCheck& check, const std::string& why);
  // State lock exclusive, before a retrain: makes the check's re-tuned
  // nprobe (retuned_knob > 0) the default meanwhile.
  void ApplyRetune(const UpkeepCheck& check);
  // State lock exclusive: records a check that needs no new index (the
  // measured estimate), or a retrain that failed (`failed` says why), and
  // restarts the count.
  // `failed`: why a retrain the check asked for did not happen.
  void RecordCheck(const UpkeepCheck& check, const std::string& failed = "");
  // No lock: a new index of `spec`, trained on these rows, holding them,
  // and tuned (what a rebuild makes, from a copy of the rows).
  static Status BuildIndex(const CollectionSpec& spec, const std::vector<uint8_t>& rows,
                           const std::vector<int64_t>& ids,
                           std::unique_ptr<index::CoarseIndex>* out);
  // Writes `fresh` as the index file at the meta's sequence (the write lock
  // held, so that `fresh` holds exactly the rows up to it), with the upkeep
  // that AdoptIndex(check) then applies: a crash leaves either the old file
  // and its upkeep, or the new one and the retrain's.
  Status SaveIndex(const index::CoarseIndex& fresh, const UpkeepCheck& check) const;
  // State lock exclusive, `fresh` caught up to every row of the table:
  // makes it the index (saved: SaveIndex wrote it), and hands the old one
  // back in *fresh (to be freed outside the lock).
  void AdoptIndex(std::unique_ptr<index::CoarseIndex>* fresh, bool saved, const UpkeepCheck& check);
  // A retrain is running (set by the collection, state lock exclusive).
  void SetRetraining(bool running) { retraining_ = running; }

 private:
  Status Rebuild();
  // Save where a failure must not fail the open (note() says).
  void SaveOnOpen();
  // Fits the index's default search knobs and candidate count to these rows
  // (all live rows) for the final recall of a default search
  // (query/knob_fit.h). *fitted (where given) says whether a fit was made
  // and adopted: none where the index fits no default search or n < 2.
  static Status Tune(const CollectionSpec& spec, index::CoarseIndex* index,
                     const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids,
                     bool* fitted = nullptr);
  // The collection's own index: also records how many items it was fitted
  // on (IndexUpkeep::fitted_items).
  Status Tune(const std::vector<uint8_t>& rows, const std::vector<int64_t>& ids);
  // The index is new or freshly trained: the count restarts and the ladder's
  // budget is its fitted nprobe.
  void IndexFitted();
  // The coarse recall below which a check repairs the index: the policy's,
  // or 0.02 under the coarse recall the fit measured at training if that is
  // lower; a policy of 1 repairs at every check. (The checks keep stage 1's
  // coarse measure for drift: the fit's exhaustive truth costs far more.)
  double RepairBelow(const UpkeepPolicy& policy) const;

  const storage::CollectionMeta* const meta_;
  const RowTable* const table_;
  const std::string index_path_;
  const uint64_t binding_;
  const int64_t save_interval_;
  bool read_only_ = false;
  bool upkeep_unsaved_ = false;  // upkeep_unsaved()
  std::unique_ptr<index::CoarseIndex> index_;
  int64_t indexed_rows_ = 0;     // rows [0, indexed_rows_) are in the index
  uint64_t index_sequence_ = 0;  // sequence covered by the index file on disk
  int64_t unsaved_vectors_ = 0;
  int64_t tombstones_ = 0;  // dead vectors still in the index
  bool index_stale_ = false;
  std::string open_mode_;
  std::string index_note_;
  std::string lost_writes_;
  // Upkeep (CheckDue ... AdoptIndex): saved with the index file (Save,
  // SaveIndex) and read back by Open, so that a reopened collection goes on
  // counting towards its next check and still says when it was last checked
  // and retrained. fitted_knob and fitted_recall are what the index's
  // training fitted (a re-tune or a check changes the index's own knobs and
  // estimate, not these).
  index::IndexUpkeep upkeep_;
  bool retraining_ = false;
  // Open: a version-2 file carries no record; a damaged record is dropped
  // (the upkeep starts from nothing, as with a file of before version 3).
  void LoadUpkeep(const std::string& record, uint64_t file_sequence);
  // The encoded record of the current upkeep (what Save writes).
  // upkeep_ with the index's fit (coarse recall, oversampling), encoded.
  std::string UpkeepRecord() const;
  // What the upkeep becomes when `fresh`, retrained for `check`, is adopted at
  // the meta's sequence (SaveIndex writes it, AdoptIndex applies it).
  index::IndexUpkeep AfterRetrain(const index::CoarseIndex& fresh, const UpkeepCheck& check,
                                  int64_t now) const;
};

}  // namespace query
}  // namespace hedgedb
